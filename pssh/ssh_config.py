"""The OpenSSH client config (``~/.ssh/config``), read as ssh reads it (the public home of
:mod:`pssh.core.ssh_config`)."""
from pssh.core.ssh_config import *  # noqa: F403
from pssh.core.ssh_config import __all__  # noqa: F401
