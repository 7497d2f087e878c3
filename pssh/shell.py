"""``InteractiveShell``: a remote login shell fed commands on its standard input.

The shell runs without a pty (as ``ssh host < script`` would): no prompts or
echo in the output, stdout and stderr kept apart. ``close()`` ends its input,
the shell exits after the last command, and ``exit_code`` is the exit status
of that last command (or of an explicit ``exit``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional, Union

from pssh import exceptions as exc
from pssh.output import HostOutput
from pssh.reader import ChannelReader
from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:
    from pssh.clients.native.single import SSHClient


class InteractiveShell:
    """One shell on one host; ``output`` streams what it prints.

    Use as a context manager to close it (end its input) on exit::

        with client.open_shell() as shell:
            shell.run("cd /tmp")
            shell.run("pwd")
        print(list(shell.stdout), shell.exit_code)
    """

    def __init__(self, client: "SSHClient", encoding: str = "utf-8",
                 read_timeout: Optional[float] = None) -> None:
        self.client = client
        try:
            channel = client.open_session()
            client.retry_eagain(channel.shell, what="starting a shell")
        except ssh2_exc.SSH2Error as err:
            raise exc.ShellError(f"cannot start a shell: {err}", client.host, client.port) from None
        self.output = HostOutput(client.host, ChannelReader(client, channel), client=client,
                                 alias=client.alias, encoding=encoding,
                                 read_timeout=read_timeout)
        self._closed = False

    def run(self, commands: Union[str, Iterable[str]]) -> None:
        """Send one command line (or several) to the shell."""
        if self._closed:
            raise exc.ShellError("the shell's input is closed", self.client.host,
                                 self.client.port)
        lines = [commands] if isinstance(commands, str) else list(commands)
        self.output.stdin.write("".join(f"{line}\n" for line in lines))

    def close(self) -> None:
        """End the shell's input: it exits once the commands sent so far are done."""
        if not self._closed:
            self._closed = True
            self.output.stdin.close()

    @property
    def stdout(self):
        return self.output.stdout

    @property
    def stderr(self):
        return self.output.stderr

    @property
    def exit_code(self) -> Optional[int]:
        return self.output.exit_code

    def __enter__(self) -> "InteractiveShell":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
