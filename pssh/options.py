"""Connection settings (the public home of :class:`ConnectOptions`).

Each setting is declared once, in :mod:`pssh.core.settings`: its type, default,
ssh_config keyword, command-line flag, asyncssh name and help. The keyword
arguments of :class:`~pssh.clients.SSHClient` and
:class:`~pssh.clients.ParallelSSHClient` map onto it one to one,
:class:`~pssh.config.HostConfig` is a per-host layer of it, ``pssh.aio.connect``
takes asyncssh's names for it, and the command line fills one from its flags.
A field left at ``None`` is "not said here".

:meth:`ConnectOptions.resolve` layers, for one host: the options given, then the
OpenSSH client config (``~/.ssh/config``), then :data:`DEFAULTS`; the result
(:class:`Resolved`) has a value for everything a connection needs.
"""
from pssh.core.settings import (DEFAULTS, FIELD_NAMES, HOST_KEY_POLICIES, ConnectOptions, Hop,
                                Key, Resolved, config_layer, declarations, ssh_config_of)

__all__ = ["ConnectOptions", "DEFAULTS", "FIELD_NAMES", "HOST_KEY_POLICIES", "Hop", "Key",
           "Resolved", "config_layer", "declarations", "ssh_config_of"]
