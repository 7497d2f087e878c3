"""MkDocs hook: the settings table, written from the settings' declarations.

A page holding ``<!-- settings-table -->`` gets, in its place, one row per
setting of :class:`pssh.options.ConnectOptions` (pssh.core.settings): its
default, the ssh_config keyword that supplies it, its ``pssh`` flag, its name in
``pssh.aio.connect`` and what it does. The table cannot drift from the code.
"""
from __future__ import annotations

MARKER = "<!-- settings-table -->"


def _cell(value) -> str:
    return "" if value in (None, "", ()) else f"`{value}`"


def table() -> str:
    from pssh.core.settings import declarations
    rows = ["| setting | default | ssh_config | `pssh` flag | `pssh.aio` | |",
            "|---|---|---|---|---|---|"]
    for name, d in declarations():
        rows.append("| " + " | ".join([
            f"`{name}`", _cell(d.default), _cell(d.ssh_config[1] if d.ssh_config else None),
            ", ".join(f"`{flag}`" for flag in d.cli),
            "" if d.asyncssh is None else f"`{d.asyncssh or name}`",
            d.help.replace("<", "&lt;") + ("" if d.parallel_ssh else " (ours)")]) + " |")
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, **kwargs) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, table())
