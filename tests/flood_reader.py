"""Reads a command's flood of output with one front end, in a process of its own: its
peak memory (VmHWM) is then its own, not the test process's (hundreds of MiB after a
few hundred tests). Run by tests/test_hostile_output.py.

    python flood_reader.py FRONT_END HOW HOST PORT KEY KNOWN_HOSTS COMMAND

FRONT_END: ``gevent`` (``SSHClient``) or ``aio`` (``pssh.aio``). HOW:

- ``lines``: stdout through the line view (gevent's ``output.stdout``, pssh.aio's
  ``readline``);
- ``slow``: stdout line by line, slowly (a pause every :data:`PAUSE_EVERY` lines), while
  stderr is read as fast as it comes, at the same time.

Prints one JSON object: for each stream read, its ``sha256``, ``bytes`` and ``pieces``
(lines, with each line's ``\\n`` counted back in for the gevent client, whose lines come
without it) and the ``longest``; ``dropped`` (bytes dropped unread, per stream); and
``peak_mib``. Log records (warnings) go to stderr.
"""
from __future__ import annotations

import hashlib
import json
import logging
import sys

#: ``slow``: the stdout reader pauses after this many lines...
PAUSE_EVERY = 100
#: ...for this long (seconds): it takes stdout far slower than the host sends it.
PAUSE = 0.002


class Tally:
    """What came of one stream."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.bytes = self.pieces = self.longest = 0

    def add(self, data: bytes) -> None:
        self.hash.update(data)
        self.bytes += len(data)
        self.pieces += 1
        self.longest = max(self.longest, len(data))

    def report(self) -> dict:
        return {"sha256": self.hash.hexdigest(), "bytes": self.bytes, "pieces": self.pieces,
                "longest": self.longest}


def with_gevent(how: str, host: str, port: int, key: str, known_hosts: str,
                command: str) -> dict:
    import gevent
    from pssh.clients import SSHClient
    tallies = {"stdout": Tally()}
    with SSHClient(host, port=port, pkey=key, allow_agent=False, identity_auth=False,
                   ssh_config=False, known_hosts=known_hosts, host_key_policy="strict",
                   num_retries=1) as client:
        output = client.run_command(command)

        def lines(stream, tally: Tally, slow: bool) -> None:
            for number, line in enumerate(stream, 1):
                # Whole lines come without their newline; a long line's pieces do not
                # end one (they are counted as they came).
                tally.add(line.encode() + (b"\n" if how == "slow" else b""))
                if slow and number % PAUSE_EVERY == 0:
                    gevent.sleep(PAUSE)

        if how == "lines":
            lines(output.stdout, tallies["stdout"], False)
        else:
            tallies["stderr"] = Tally()
            readers = [gevent.spawn(lines, output.stdout, tallies["stdout"], True),
                       gevent.spawn(lines, output.stderr, tallies["stderr"], False)]
            gevent.joinall(readers, raise_error=True)
        dropped = client._reader_of(output.channel).streams.dropped
    return {**{name: tally.report() for name, tally in tallies.items()}, "dropped": dropped}


def with_aio(how: str, host: str, port: int, key: str, known_hosts: str,
             command: str) -> dict:
    import asyncio
    from pssh import aio

    async def main() -> dict:
        tallies = {"stdout": Tally()}
        async with aio.connect(host, port, client_keys=[key], known_hosts=known_hosts,
                               agent_path=None, ssh_config=False) as conn:
            proc = await conn.create_process(command, encoding=None)

            async def lines(stream, tally: Tally, slow: bool) -> None:
                number = 0
                async for line in stream:
                    tally.add(line)
                    number += 1
                    if slow and number % PAUSE_EVERY == 0:
                        await asyncio.sleep(PAUSE)

            if how == "lines":
                await lines(proc.stdout, tallies["stdout"], False)
            else:
                tallies["stderr"] = Tally()
                await asyncio.gather(lines(proc.stdout, tallies["stdout"], True),
                                     lines(proc.stderr, tallies["stderr"], False))
            dropped = proc._streams.core.dropped
            await proc.wait()
        return {**{name: tally.report() for name, tally in tallies.items()},
                "dropped": dropped}
    return asyncio.run(main())


def peak_mib() -> int:
    # VmHWM, this program's own peak: ru_maxrss keeps, across exec, the peak of the
    # process that started us.
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status
                    if line.startswith("VmHWM:")) // 1024


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    front_end, how, host, port, key, known_hosts, command = sys.argv[1:]
    read = {"gevent": with_gevent, "aio": with_aio}[front_end]
    result = read(how, host, int(port), key, known_hosts, command)
    print(json.dumps({**result, "peak_mib": peak_mib()}))


if __name__ == "__main__":
    main()
