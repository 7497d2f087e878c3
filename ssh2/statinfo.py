"""``StatInfo``: ssh2-python's name for the stat record of a received file.

The same record as :class:`ssh2.fileinfo.FileInfo` (``st_size``,
``st_mode``, ``st_mtime``, ...), which ``Session.scp_recv2`` returns.
"""
from ssh2.fileinfo import FileInfo as StatInfo

__all__ = ["StatInfo"]
