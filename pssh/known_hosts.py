"""Host keys: OpenSSH's known_hosts, read as OpenSSH does (the public home of
:mod:`pssh.core.known_hosts`)."""
from pssh.core.known_hosts import *  # noqa: F403
from pssh.core.known_hosts import __all__  # noqa: F401
