"""A command's output streamed from a worker (``processes=``, Dask): what arrives while
the reader is granting credit must reach the reader.

The reader of a :class:`~pssh.fanout.run.remote.RemoteCommand` grants its worker credit,
then waits for news. Over Dask the grant itself waits (a queue's put, made in a thread),
and the other greenlets run meanwhile, the one receiving the worker's messages among
them. The test's worker plays the transport's part the way Dask's did when a ``pssh run
-I`` of 7 MB hung: its last output and its exit arrive during the reader's grant. The
process transport, whose sends never wait, runs beside it for comparison.
"""
import gevent
import pytest

from pssh.fanout.run.remote import WINDOW, RemoteCommand


class Worker:
    """Takes the command's messages as a transport would. ``on_credit`` runs while the
    grant is being sent; with ``send_waits`` the send gives the loop a turn first (the
    Dask queue's put, in a thread), otherwise it returns at once (the process pipe)."""

    def __init__(self, send_waits: bool) -> None:
        self.send_waits = send_waits
        self.sent = []
        self.on_credit = None

    def send(self, message, host=None):
        self.sent.append(message)
        if message[0] == "credit" and self.on_credit is not None:
            gevent.spawn(self.on_credit)  # the worker answers while the put is on its way
        if self.send_waits:
            gevent.sleep(0.01)


@pytest.mark.parametrize("send_waits", [True, False], ids=["dask-like", "pipe-like"])
def test_output_and_exit_arriving_during_the_grant_end_the_read(send_waits):
    worker = Worker(send_waits)
    command = RemoteCommand(worker, 7, "host-a")

    def answer():
        command.on_data(0, b"the last line\n")
        command.on_status(0, None)
        command.on_exit(0, None)

    worker.on_credit = answer
    with gevent.Timeout(10, AssertionError("the reader missed what came during its grant")):
        chunks = list(command.stdout.chunks())
    assert chunks == [b"the last line\n"]
    assert command.exit_code == 0 and command.closed
    assert worker.sent == [("credit", 7, 0, WINDOW)]


@pytest.mark.parametrize("send_waits", [True, False], ids=["dask-like", "pipe-like"])
def test_a_worker_lost_during_the_grant_fails_the_read(send_waits):
    worker = Worker(send_waits)
    command = RemoteCommand(worker, 7, "host-a")
    worker.on_credit = lambda: command.on_lost(OSError("worker process 1 is gone"))
    with gevent.Timeout(10, AssertionError("the reader missed the loss during its grant")):
        with pytest.raises(OSError, match="worker process 1 is gone"):
            list(command.stdout.chunks())
