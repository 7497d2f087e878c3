"""Python bindings for libssh2: fast, GIL-free, blocking and non-blocking SSH.

Modules follow the established ``ssh2`` layout: ``ssh2.session.Session``,
``ssh2.channel.Channel``, ``ssh2.sftp.SFTP`` and so on.
"""

#: The version of the pssh2 distribution (ssh2 and pssh): its one source, read
#: by the build (pyproject.toml) and reported by ``pssh --version``.
__version__ = "0.1.0"
