"""Stopping remote commands that were started without a pty.

Without a pty, sshd leaves a command running when its channel closes, and
it refuses "signal" requests for some sessions (root logins here). A command
started *cancellable* carries a marker in its environment
(``LC_PSSH_RUN=<id>``, set by the command line itself, so no server setting
is needed); cancelling sends the signal request, then runs
:func:`kill_script` on a channel of its own, which signals every process of
the user's whose environment holds the marker (Linux ``/proc``, GNU grep),
then closes the command's channel. With a pty, closing the channel alone
makes sshd hang the command up.
"""
from __future__ import annotations

import os
import shlex

MARKER = "LC_PSSH_RUN"  # LC_*: the variables sshd passes on by default, should one be sent


def new_marker() -> str:
    return os.urandom(8).hex()  # what secrets.token_hex does, without its imports


def with_marker(command: str, marker: str) -> str:
    """``command`` run with ``LC_PSSH_RUN=<marker>`` in its environment and its children's.

    The login shell execs a new ``$SHELL`` for the command: /proc shows the
    environment a process was started with, so the marker must be there
    before the shell that runs the command starts.
    """
    return f"export {MARKER}={marker}; exec \"$SHELL\" -c {shlex.quote(command)}"


def kill_connection_script(signal: str = "TERM") -> str:
    """A POSIX shell command that sends ``signal`` to every process started over the SSH
    connection it runs on (their ``SSH_CONNECTION``, which sshd sets to the same value for
    every channel of a connection), but itself.

    For a connection with one command at a time (a poller's): that command is stopped
    without having been started with a marker, so the command itself runs unwrapped, on
    any server (a network device's CLI too; only the stop needs a POSIX shell).
    """
    return ('e="SSH_CONNECTION=$SSH_CONNECTION"; '
            'for f in $(grep -lzxF "$e" /proc/[0-9]*/environ 2>/dev/null); do '
            f'p=${{f#/proc/}}; p=${{p%/environ}}; [ "$p" = "$$" ] || '
            f'kill -{shlex.quote(signal)} "$p" 2>/dev/null; done; true')


def kill_script(marker: str, signal: str = "TERM") -> str:
    """A POSIX shell command that sends ``signal`` to the processes carrying ``marker``.

    Found by their environment, and by their command line: a command stopped the
    moment it started may still be the login shell running :func:`with_marker`'s
    line, which has the marker in its environment only once it has exec'd. A second
    scan catches what was forked while the first one signalled.
    """
    entry = f"{MARKER}={marker}"
    scan = (f"{{ grep -lzxF {shlex.quote(entry)} /proc/[0-9]*/environ; "
            f"grep -lzF {shlex.quote(entry + ';')} /proc/[0-9]*/cmdline; }} 2>/dev/null")
    return (f"for pass in 1 2; do found=$({scan}); [ -n \"$found\" ] || break; "
            f"for f in $found; do p=${{f#/proc/}}; p=${{p%/*}}; [ \"$p\" = \"$$\" ] || "
            f"kill -{shlex.quote(signal)} \"$p\" 2>/dev/null; done; done; true")
