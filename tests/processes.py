"""Looking at this machine's processes: the test servers run here, so a remote command
is a local process the tests can see."""
import contextlib
import os
import signal


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def processes_with(word: str):
    """Live processes whose command line holds ``word``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if word.encode() in fh.read() and alive(int(pid)):
                    found.append(int(pid))
        except OSError:
            pass
    return found


def children_running(parent: int, word: str):
    """Live processes that ``parent`` started whose command line holds ``word``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                command = fh.read()
        except OSError:  # gone meanwhile
            continue
        if fields[0] != "Z" and int(fields[1]) == parent and word.encode() in command:
            found.append(int(pid))
    return found


def in_session(sid: int):
    """Live processes of session ``sid`` (a process started with ``start_new_session``
    and everything it started that stayed in its session)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(pid))
    return found


@contextlib.contextmanager
def stopped(server):
    """SIGSTOP an sshd (a pssh.sshd server) and its sessions for the ``with`` block: TCP
    still answers, SSH does not (a host that hangs)."""
    from pssh.sshd import _descendants
    pids = [server.process.pid, *_descendants(server.process.pid)]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield pids
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
