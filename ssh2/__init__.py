"""Python bindings for libssh2: fast, GIL-free, blocking and non-blocking SSH.

Modules follow the established ``ssh2`` layout: ``ssh2.session.Session``,
``ssh2.channel.Channel``, ``ssh2.sftp.SFTP`` and so on.
"""
