"""MkDocs hook: the command-line reference, written from the argparse definitions.

A page holding ``<!-- cli-reference -->`` gets, in its place, the ``--help`` of
``pssh`` and of each subcommand, so the reference can never drift from the parser.
"""
from __future__ import annotations

import os

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, **kwargs) -> str:
    if MARKER not in markdown:
        return markdown
    from pssh.cli.options import build
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same width every build
    parser = build()
    sections = [("pssh", parser)]
    subparsers = parser._subparsers._group_actions[0].choices
    sections += [(f"pssh {name}", sub) for name, sub in subparsers.items()]
    text = []
    for title, sub in sections:
        text.append(f"## `{title}`\n\n```text\n{sub.format_help().rstrip()}\n```\n")
    return markdown.replace(MARKER, "\n".join(text))
