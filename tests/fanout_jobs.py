"""Jobs for tests/test_fanout.py, run in worker processes (``"fanout_jobs:echo"``)."""
import time


def echo(link, init):
    """Sends ``("ready", init)``, then each message back; ``("terminated",)`` when told to
    terminate; ends with its parent."""
    link.on_terminate(lambda: link.send(("terminated",)))
    link.send(("ready", init))
    while (message := link.receive()) is not None:
        link.send(("echo",) + message)


def stubborn(link, init):
    """Says it is ready, then never listens again (blocks its whole process)."""
    link.send(("ready", init))
    link.flush()
    while True:
        time.sleep(3600)
