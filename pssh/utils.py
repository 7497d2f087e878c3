"""Logging switches (parallel-ssh's ``pssh.utils``).

``host_logger`` (``pssh.host_logger``) gets one INFO record per line of
remote output as it is read, ``[host]\\tline`` (stderr lines marked
``[err]``); :func:`enable_host_logger` prints them.
"""
from __future__ import annotations

import logging

host_logger = logging.getLogger("pssh.host_logger")
logger = logging.getLogger("pssh")


def enable_logger(_logger: logging.Logger, level: int = logging.INFO) -> None:
    """Print ``_logger``'s records at ``level`` and above on standard error (once)."""
    _logger.setLevel(level)
    if any(isinstance(h, logging.StreamHandler) for h in _logger.handlers):
        logger.warning("logger %s already has a StreamHandler", _logger.name)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s %(name)-15s %(message)s"))
    _logger.addHandler(handler)


def enable_host_logger() -> None:
    """Print remote output through ``host_logger`` as it is read."""
    enable_logger(host_logger)


def enable_debug_logger() -> None:
    """Print the library's debug log."""
    enable_logger(logger, level=logging.DEBUG)
