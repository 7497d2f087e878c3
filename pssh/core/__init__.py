"""The session core: every SSH procedure, written once, with no event loop in it.

What it owns: the procedures that talk to a server through the ``ssh2``
bindings — connecting, the handshake and host key check, the login order,
keepalives, commands and their streams, SFTP and SCP transfers, port and agent
forwarding, jump chains — each a generator that yields what it waits for
(:mod:`pssh.core.waits`) instead of waiting; and the data they work from
(settings, ssh_config, known_hosts, keys, errors, deadlines).

What it may import: its own modules, ``ssh2`` and the standard library (and
``cryptography`` to check host certificates' signatures); no event loop. A
runner (:mod:`pssh.runners`) drives its procedures on an event loop; the public
APIs (:mod:`pssh.clients`, :mod:`pssh.aio`, :mod:`pssh.poll`) are shells over it.
Public homes of some of its modules: :mod:`pssh.options` (settings),
:mod:`pssh.exceptions` (errors), :mod:`pssh.ssh_config`, :mod:`pssh.known_hosts`.
"""
