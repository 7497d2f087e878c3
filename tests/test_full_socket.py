"""A command's input written while its output is read, over a socket that is always full.

Reader and writer share one libssh2 session, and libssh2 sends one packet at a time:
a packet half written to a full socket can only be finished by the call that began
it. The reader's window adjustment, sent before every read, then waits behind the
writer's packet, while data for the reader is already there. A reader that read again
at once (there is data, after all) never let the writer run again: the whole loop
spun for ever (a ``pssh run -I`` of megabytes to ``cat`` hung so, once, on a loaded
machine). A client socket with a tiny send buffer makes that state come at almost
every packet; each front end must get every byte through, both ways, without a hang.
"""
import asyncio
import hashlib
import socket

import gevent

from conftest import trusting
from pssh import aio
from pssh.clients import SSHClient

#: Input sent to ``cat`` (it all comes back): far beyond the channel's window both ways.
SIZE = 16 * 1024 * 1024
PIECE = 64 * 1024
#: The client socket's send buffer: smaller than one SSH data packet (32 KiB).
SEND_BUFFER = 4096


def data() -> bytes:
    return bytes(range(256)) * (SIZE // 256)


def test_gevent_client(server, servers, tmp_path):
    client = SSHClient(server.address, port=server.port, pkey=servers.keys.private(),
                       known_hosts=trusting(tmp_path / "known_hosts", servers),
                       allow_agent=False, identity_auth=False, timeout=30)
    try:
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        sent = data()
        output = client.run_command("cat")

        def feed():
            for start in range(0, len(sent), PIECE):
                output.stdin.write(sent[start:start + PIECE])
            output.stdin.close()

        feeder = gevent.spawn(feed)
        # A greenlet of its own counts the loop's turns: the reading must leave it some.
        turns = [0]

        def count_turns():
            while True:
                gevent.sleep(0.01)
                turns[0] += 1

        counter = gevent.spawn(count_turns)
        with gevent.Timeout(120, AssertionError("the reading hung")):
            received = hashlib.sha256()
            size = 0
            for chunk in output.buffers.stdout.rw_buffer.chunks():
                received.update(chunk)
                size += len(chunk)
            feeder.get()
        counter.kill()
        client.wait_finished(output)
    finally:
        client.close()
    assert size == SIZE and received.digest() == hashlib.sha256(sent).digest()
    assert output.exit_code == 0
    assert turns[0] > 0, "the loop never ran anything else while the output was read"


def test_asyncio_client(server, servers, tmp_path, run_loop):
    sent = data()

    async def main():
        async with aio.connect(server.address, port=server.port, username=server.user,
                               client_keys=[servers.keys.private()], agent_path=None,
                               known_hosts=trusting(tmp_path / "known_hosts", servers)) as conn:
            conn.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                                                     SEND_BUFFER)
            process = await conn.create_process("cat", encoding=None)

            async def feed():
                for start in range(0, len(sent), PIECE):
                    process.stdin.write(sent[start:start + PIECE])
                    await process.stdin.drain()
                process.stdin.write_eof()

            async def read():
                received, size = hashlib.sha256(), 0
                while chunk := await process.stdout.read(PIECE):
                    received.update(chunk)
                    size += len(chunk)
                return size, received.digest()

            _, (size, digest) = await asyncio.wait_for(asyncio.gather(feed(), read()), 120)
            completed = await process.wait()
            return size, digest, completed.exit_status

    size, digest, status = run_loop(main())
    assert size == SIZE and digest == hashlib.sha256(sent).digest() and status == 0
