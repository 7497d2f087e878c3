"""Exceptions: parallel-ssh 2.16's names, arguments and hierarchy (its ``pssh.exceptions``).

Defined in :mod:`pssh.core.errors`, which both front ends and the core raise;
this is their public home. Every one names its host and port (``.host``,
``.port``, and ``str()``); ``exc.args`` keeps parallel-ssh's layout.
"""
from pssh.core.errors import *  # noqa: F403
from pssh.core.errors import __all__  # noqa: F401
