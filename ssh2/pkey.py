"""``PublicKey``: an identity held by the SSH agent (ssh2-python's ``ssh2.pkey``).

Defined in :mod:`ssh2.agent`, beside the agent whose list it points into.
"""
from ssh2.agent import PublicKey

__all__ = ["PublicKey"]
