"""Looking at this machine's processes: the test servers run here, so a remote command
is a local process the tests can see.

Any process listed here may end before it is looked at again or signalled (a session
closing, a command finishing): each function takes that as "gone", never as an error.
"""
import contextlib
import os
import platform
import signal
import socket

from pssh.sshd import ESTABLISHED, tcp_sockets

#: System call numbers (as /proc/PID/task/TID/syscall shows them) of the calls the tests
#: look for: a write blocked on a full pipe, a wait on sockets.
SYSCALLS = {
    "x86_64": {"0": "read", "1": "write", "7": "poll", "23": "select", "270": "pselect6",
               "271": "ppoll"},
    "aarch64": {"63": "read", "64": "write", "72": "pselect6", "73": "ppoll"},
}[platform.machine()]


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # gone before the open (ENOENT) or between the open and the read (ESRCH)
        return False


def cmdline(pid: int) -> bytes:
    """The command line of ``pid`` (arguments NUL-separated), ``b""`` once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def processes_with(word: str):
    """Live processes with an argument holding ``word`` (``"sleep 30"`` finds the shell
    running ``sh -c "...; sleep 30"``, not the ``sleep`` it started: see :func:`pgrep`)."""
    return [int(pid) for pid in filter(str.isdigit, os.listdir("/proc"))
            if word.encode() in cmdline(int(pid)) and alive(int(pid))]


def pgrep(words: str):
    """Live processes whose arguments, joined by spaces, hold ``words`` (as ``pgrep -f``:
    ``"sleep 30"`` finds the shell running it and the ``sleep`` itself)."""
    return [int(pid) for pid in filter(str.isdigit, os.listdir("/proc"))
            if words.encode() in cmdline(int(pid)).replace(b"\0", b" ") and alive(int(pid))]


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


def descendants(root: int) -> dict:
    """Live processes below ``root``: ``{(pid, start time): command line}`` (the start
    time tells a process from a later one given the same pid)."""
    children: dict = {}
    started: dict = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
            started[int(entry)] = int(fields[19])
    found, stack = {}, [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found[(child, started[child])] = cmdline(child).replace(b"\0", b" ").decode(
                errors="replace").strip()
            stack.append(child)
    return found


def tcp_owners(address: str, port: int) -> list:
    """Processes holding a TCP socket whose local end is ``address:port`` (IPv4)."""
    targets = {row.target for row in tcp_sockets() if row.local == (address, port)}
    owners = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target in targets:
                owners.append(int(pid))
                break
    return owners


def tcp_unsent(sock: socket.socket) -> int:
    """Bytes the other end of ``sock`` (a TCP connection on this machine, IPv4) has
    written and not yet delivered into ``sock``: its socket's send queue."""
    theirs, ours = sock.getpeername(), sock.getsockname()
    for row in tcp_sockets():
        if row.local == theirs and row.remote == ours:
            return row.send_queue
    raise LookupError(f"no TCP socket at {theirs} connected to {ours}")


def tcp_peers(pid: int) -> list:
    """The processes at the other end of ``pid``'s TCP connections on this machine (an
    sshd session's: its client), ``pid`` itself left out."""
    try:
        targets = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        rows = tcp_sockets()
    except OSError:  # ended meanwhile
        return []
    peers = set()
    for row in rows:
        if row.target in targets and row.state == ESTABLISHED:
            peers.update(tcp_owners(*row.remote))
    peers.discard(pid)
    return sorted(peers)


def open_fds(pid: object = "self") -> set:
    """``{(fd, what it is)}`` of process ``pid`` (this one by default), as /proc shows
    them (``socket:[inode]``, ``pipe:[inode]``, ``anon_inode:[eventpoll]``, a path). The
    listing's own descriptor is left out."""
    folder = f"/proc/{pid}/fd"
    found = set()
    for fd in os.listdir(folder):
        try:
            target = os.readlink(f"{folder}/{fd}")
        except OSError:  # closed since the listing (its own descriptor, say)
            continue
        found.add((int(fd), target))
    own = os.path.realpath(folder)
    return {(fd, target) for fd, target in found if target not in (folder, own)}


def described_socket(target: str) -> str:
    """``socket:[inode]`` with its TCP ends, where it is a TCP socket (IPv4)."""
    if not target.startswith("socket:["):
        return target
    try:
        rows = tcp_sockets()
    except OSError:
        return target
    for row in rows:
        if row.target == target:
            return f"{target} tcp {row.local[0]}:{row.local[1]} -> {row.remote[0]}:{row.remote[1]}"
    return target


def signal_each(pids, signum: int) -> list:
    """Send ``signum`` to each of ``pids``; returns those that were still there (one that
    ended since it was listed is skipped)."""
    reached = []
    for pid in pids:
        try:
            os.kill(pid, signum)
            reached.append(pid)
        except ProcessLookupError:
            pass
    return reached


def in_syscall(tid: int, pid: object = "self"):
    """``(name, first argument)`` of the system call thread ``tid`` of process ``pid``
    (this one by default) is blocked in (name None for a call not in :data:`SYSCALLS`),
    or None when it runs."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as fh:
            fields = fh.read().split()
    except OSError:  # the thread ended
        return None
    if not fields or not fields[0].isdigit():  # "running"
        return None
    return SYSCALLS.get(fields[0]), int(fields[1], 16)


@contextlib.contextmanager
def stopped(server):
    """SIGSTOP an sshd (a pssh.sshd server) and its sessions for the ``with`` block: TCP
    still answers, SSH does not (a host that hangs). A session that ends between being
    listed and being stopped is left out."""
    from pssh.sshd import _descendants
    pids = signal_each([server.process.pid, *_descendants(server.process.pid)],
                       signal.SIGSTOP)
    try:
        yield pids
    finally:
        signal_each(pids, signal.SIGCONT)


def run_or_show_stacks(command, timeout: float, **kwargs):
    """``subprocess.run(command, capture_output=True, ...)``; a run still going after
    ``timeout`` seconds is a hang: each pssh process of its tree (the command line, its
    worker processes, its Dask workers) is asked for its greenlets' stacks
    (:mod:`pssh.stacks`), the tree is killed, and the test fails showing them."""
    import subprocess
    given_input, stdin = kwargs.pop("input", None), kwargs.pop("stdin", None)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.PIPE if given_input is not None else stdin,
                          **kwargs) as process:
        stdout, stderr = communicate_or_show_stacks(process, timeout, given_input)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def signal_state(pid: int) -> str:
    """What the kernel says of process ``pid``'s signals: pending (its own and its
    group's), blocked, ignored and caught, as masks (bit N-1 is signal N)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return " ".join(line.strip().replace(":\t", "=") for line in status
                            if line.startswith(("SigPnd", "ShdPnd", "SigBlk", "SigIgn",
                                                "SigCgt")))
    except OSError:
        return "ended"


def communicate_or_show_stacks(process, timeout: float, given_input=None):
    """``process.communicate(given_input)`` (its stdout and stderr pipes); one still
    running after ``timeout`` seconds is a hang: each process of its tree is asked for
    its stacks (SIGUSR1: :mod:`pssh.stacks` in a pssh process), the tree is killed, and
    AssertionError shows its standard error."""
    import subprocess
    import time
    try:
        return process.communicate(given_input, timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = [pid for pid, _ in descendants(process.pid)]
        signal_each([process.pid] + tree, signal.SIGUSR1)
        time.sleep(3)  # time to write them: the stacks are what this failure is for
        signal_each([process.pid] + tree, signal.SIGKILL)
        _, stderr = process.communicate()
        if isinstance(stderr, bytes):
            stderr = stderr.decode(errors="replace")
        raise AssertionError(
            f"still running after {timeout} s (a hang): {process.args}\n"
            f"its standard error, with every process's stacks:\n{stderr[-60000:]}") from None
