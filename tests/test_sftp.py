"""SFTP and SFTPHandle: every operation against a real sftp server."""
import hashlib
import os
import re
import shlex
import stat
import time

import pytest

from conftest import connect
from loopback import address
from processes import cmdline, in_syscall, tcp_unsent
from pssh.sshd import OpenSSHServer, _descendants

from ssh2 import exceptions as exc
from ssh2.sftp import (LIBSSH2_FX_NO_SUCH_FILE, LIBSSH2_FXF_APPEND, LIBSSH2_FXF_CREAT,
                       LIBSSH2_FXF_EXCL, LIBSSH2_FXF_READ, LIBSSH2_FXF_TRUNC, LIBSSH2_FXF_WRITE,
                       LIBSSH2_SFTP_S_IFDIR, LIBSSH2_SFTP_S_IFLNK, LIBSSH2_SFTP_S_IFMT,
                       LIBSSH2_SFTP_S_IFREG, LIBSSH2_SFTP_S_IRUSR, LIBSSH2_SFTP_S_IWUSR)
from ssh2.session import PATCHED_LIBSSH2
from ssh2.sftp_handle import SFTPAttributes, SFTPHandle, SFTPStatVFS
from waiting import eventually

WRITE_NEW = LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC


@pytest.fixture
def sftp(session):
    return session.sftp_init()


def test_write_then_read_back(sftp, tmp_path):
    path = str(tmp_path / "f")
    data = os.urandom(700_000)
    with sftp.open(path, WRITE_NEW, LIBSSH2_SFTP_S_IRUSR | LIBSSH2_SFTP_S_IWUSR) as fh:
        rc, written = fh.write(data)
        assert written == len(data)
    assert open(path, "rb").read() == data
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with sftp.open(path, LIBSSH2_FXF_READ, 0) as fh:
        assert b"".join(chunk for _, chunk in fh) == data


def test_append_flag(sftp, tmp_path):
    path = tmp_path / "a"
    path.write_bytes(b"start-")
    with sftp.open(str(path), LIBSSH2_FXF_WRITE | LIBSSH2_FXF_APPEND, 0) as fh:
        fh.write(b"end")
    assert path.read_bytes() == b"start-end"


def test_excl_flag_refuses_existing_file(sftp, tmp_path):
    path = tmp_path / "exists"
    path.write_bytes(b"x")
    with pytest.raises(exc.SFTPProtocolError) as info:
        sftp.open(str(path), LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL, 0o644)
    assert info.value.sftp_status in (4, 11)


def test_read_sizes_seek_tell_rewind(sftp, tmp_path):
    path = tmp_path / "s"
    path.write_bytes(bytes(range(256)) * 4)
    fh = sftp.open(str(path), LIBSSH2_FXF_READ, 0)
    assert fh.read(10) == (10, bytes(range(10)))
    assert fh.tell() == 10 and fh.tell64() == 10
    fh.seek64(250)
    assert fh.read(6)[1] == bytes(range(250, 256))
    fh.rewind()
    assert fh.read(3)[1] == b"\x00\x01\x02"
    fh.seek(1024)
    assert fh.read() == (0, b"")
    assert fh.close() == 0
    assert fh.closed
    with pytest.raises(exc.SFTPHandleError):
        fh.read()


def test_read_into_buffer(sftp, tmp_path):
    path = tmp_path / "r"
    data = os.urandom(3_000_000)
    path.write_bytes(data)
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    received = bytearray()
    with sftp.open(str(path), LIBSSH2_FXF_READ, 0) as fh:
        while (n := fh.read_into(view)) > 0:
            received += view[:n]
        with pytest.raises((TypeError, BufferError)):
            fh.read_into(b"immutable")
    assert bytes(received) == data


def test_stat_lstat_fstat_setstat_fsetstat(sftp, tmp_path):
    path = tmp_path / "st"
    path.write_bytes(b"12345")
    link = tmp_path / "link"
    os.symlink(path, link)
    attrs = sftp.stat(str(link))
    assert isinstance(attrs, SFTPAttributes)
    assert attrs.filesize == 5
    assert attrs.permissions & LIBSSH2_SFTP_S_IFMT == LIBSSH2_SFTP_S_IFREG
    assert attrs.mtime == int(os.stat(path).st_mtime)
    assert sftp.lstat(str(link)).permissions & LIBSSH2_SFTP_S_IFMT == LIBSSH2_SFTP_S_IFLNK

    new = SFTPAttributes()
    new.permissions = 0o100640
    new.atime = 1_000_000
    new.mtime = 2_000_000
    assert sftp.setstat(str(path), new) == 0
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640 and int(st.st_mtime) == 2_000_000

    with sftp.open(str(path), LIBSSH2_FXF_READ | LIBSSH2_FXF_WRITE, 0) as fh:
        assert fh.fstat().filesize == 5
        trunc = SFTPAttributes()
        trunc.filesize = 2
        assert fh.fsetstat(trunc) == 0
        assert fh.fsync() == 0
        assert isinstance(fh.fstatvfs(), SFTPStatVFS)
    assert path.read_bytes() == b"12"
    assert "filesize=" in repr(attrs)


def test_mkdir_opendir_readdir_rmdir(sftp, tmp_path):
    folder = tmp_path / "dir"
    assert sftp.mkdir(str(folder), 0o750) == 0
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o750
    for name in ("a", "b", "ccc"):
        (folder / name).write_bytes(name.encode())
    with sftp.opendir(str(folder)) as dh:
        entries = {name: attrs for _, name, attrs in dh.readdir()}
    assert set(entries) == {b".", b"..", b"a", b"b", b"ccc"}
    assert entries[b"ccc"].filesize == 3
    assert entries[b"."].permissions & LIBSSH2_SFTP_S_IFMT == LIBSSH2_SFTP_S_IFDIR
    with sftp.opendir(str(folder)) as dh:
        longs = [longentry for _, name, longentry, _ in dh.readdir_ex() if name == b"ccc"]
    assert longs and b"ccc" in longs[0]
    with pytest.raises(exc.SFTPProtocolError):
        sftp.rmdir(str(folder))
    for name in ("a", "b", "ccc"):
        assert sftp.unlink(str(folder / name)) == 0
    assert sftp.rmdir(str(folder)) == 0
    assert not folder.exists()


def test_rename_and_posix_rename(sftp, tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_bytes(b"A")
    c.write_bytes(b"C")
    assert sftp.rename(str(a), str(b)) == 0
    assert b.read_bytes() == b"A" and not a.exists()
    assert sftp.posix_rename(str(b), str(c)) == 0
    assert c.read_bytes() == b"A" and not b.exists()


def test_symlink_readlink_realpath(sftp, tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"t")
    link = tmp_path / "sym"
    sftp.stat(str(target))  # not the session's first request (libssh2 once misread that)
    assert sftp.symlink(str(target), str(link)) == 0
    assert os.readlink(link) == str(target)
    with pytest.raises(exc.SFTPProtocolError):
        sftp.symlink(str(target), str(link))  # the link exists: the server's failure
    assert sftp.readlink(str(link)) == str(target)
    assert sftp.realpath(str(tmp_path / "." / "target")) == str(target)
    assert sftp.realpath(".").startswith("/")
    with pytest.raises(exc.SFTPProtocolError):
        sftp.readlink(str(target))


def test_statvfs(sftp, tmp_path):
    st = sftp.statvfs(str(tmp_path))
    vfs = os.statvfs(tmp_path)
    assert st.f_bsize == vfs.f_bsize
    assert st.f_namemax == vfs.f_namemax
    assert st.f_blocks == vfs.f_blocks


def test_errors_carry_sftp_status(sftp, tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(exc.SFTPNoSuchFileError) as info:
        sftp.open(missing, LIBSSH2_FXF_READ, 0)
    err = info.value
    assert err.sftp_status == LIBSSH2_FX_NO_SUCH_FILE
    assert err.status_name == "FX_NO_SUCH_FILE"
    assert err.errno == -31
    assert missing in str(err) and "FX_NO_SUCH_FILE" in str(err)
    assert sftp.last_error() == LIBSSH2_FX_NO_SUCH_FILE
    with pytest.raises(exc.SFTPNoSuchFileError):
        sftp.stat(missing)
    with pytest.raises(exc.SFTPProtocolError):
        sftp.unlink(missing)


def test_permission_denied_status(sftp):
    # Read-only sysctls refuse writes even to root.
    with pytest.raises(exc.SFTPPermissionDeniedError) as info:
        sftp.open("/proc/sys/kernel/ostype", LIBSSH2_FXF_WRITE, 0)
    assert info.value.sftp_status == 3


def test_download_upload_with_progress(sftp, tmp_path):
    src = tmp_path / "src.bin"
    data = os.urandom(9_000_000)
    src.write_bytes(data)
    os.chmod(src, 0o640)
    progress = []
    dest = tmp_path / "out" / "dest.bin"
    dest.parent.mkdir()
    total = sftp.download(str(src), dest, callback=lambda done, size: progress.append((done, size)))
    assert total == len(data)
    assert dest.read_bytes() == data
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o640
    assert progress[-1] == (len(data), len(data))
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)
    assert os.listdir(dest.parent) == ["dest.bin"]

    up = tmp_path / "uploaded.bin"
    up.write_bytes(b"old contents")
    ups = []
    assert sftp.upload(str(src), str(up), callback=lambda d, s: ups.append(d)) == len(data)
    assert up.read_bytes() == data
    assert stat.S_IMODE(os.stat(up).st_mode) == 0o640
    assert ups[-1] == len(data)
    assert sorted(os.listdir(tmp_path)) == ["out", "src.bin", "uploaded.bin"]


def test_empty_file_transfers(sftp, tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert sftp.download(str(tmp_path / "empty"), tmp_path / "got") == 0
    assert (tmp_path / "got").read_bytes() == b""
    assert sftp.upload(tmp_path / "empty", str(tmp_path / "put")) == 0
    assert (tmp_path / "put").read_bytes() == b""


def test_failed_download_leaves_no_file(sftp, tmp_path):
    dest = tmp_path / "never"
    with pytest.raises(exc.SFTPNoSuchFileError):
        sftp.download(str(tmp_path / "missing"), dest)
    assert os.listdir(tmp_path) == []

    src = tmp_path / "src"
    src.write_bytes(os.urandom(6_000_000))

    def interrupt(done, size):
        raise KeyboardInterrupt("stop")

    with pytest.raises(KeyboardInterrupt):
        sftp.download(str(src), dest, callback=interrupt)
    assert os.listdir(tmp_path) == ["src"]


def test_failed_upload_leaves_no_remote_file(sftp, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(6_000_000))
    (tmp_path / "remote").mkdir()

    def interrupt(done, size):
        raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        sftp.upload(src, str(tmp_path / "remote" / "dest"), callback=interrupt)
    assert os.listdir(tmp_path / "remote") == []
    with pytest.raises(exc.SFTPProtocolError):
        sftp.upload(src, str(tmp_path / "no-such-dir" / "dest"))
    with pytest.raises(FileNotFoundError):
        sftp.upload(tmp_path / "no-local-file", str(tmp_path / "remote" / "x"))


def test_download_byte_exact_large(sftp, tmp_path):
    src = tmp_path / "large"
    with open(src, "wb") as fh:
        for _ in range(8):
            fh.write(os.urandom(4 << 20))
    sftp.download(str(src), tmp_path / "copy")
    assert hashlib.sha256((tmp_path / "copy").read_bytes()).digest() == \
        hashlib.sha256(src.read_bytes()).digest()


def test_handles_cannot_be_built_directly():
    with pytest.raises(TypeError):
        SFTPHandle()


@pytest.fixture
def patched_libssh2_and_sftp_server():
    """What the read-ahead tests need: missing, they fail saying how to get it (a skip
    would pass CI while testing nothing)."""
    if not PATCHED_LIBSSH2:
        pytest.fail("needs the bundled libssh2 with our patches: LIBSSH2_BUNDLE=1 pip install .",
                    pytrace=False)
    if SFTP_SERVER is None:
        pytest.fail("needs OpenSSH's sftp-server: apt-get install openssh-sftp-server",
                    pytrace=False)


SFTP_SERVER = next((p for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                                  "/usr/libexec/sftp-server") if os.path.exists(p)), None)


@pytest.mark.usefixtures("patched_libssh2_and_sftp_server")
@pytest.mark.parametrize("refused, largest", [("", 261120), ("-P limits", 30000)])
def test_read_requests_as_large_as_the_server_allows(tmp_path, refused, largest):
    # sftp-server logs every request's length at DEBUG1 (to stderr with -e; the
    # subsystem runs through the shell, which sends it to a file). OpenSSH answers
    # limits@openssh.com with a max-read-length of 261,120; a server that refuses
    # the request (-P) gets libssh2's usual 30,000-byte requests.
    data = os.urandom(5_000_000)
    (tmp_path / "big").write_bytes(data)
    log_file = tmp_path / "sftp.log"
    # sshd runs the subsystem through the shell: the paths quoted for it.
    config = [f"Subsystem sftp {SFTP_SERVER} -e -l DEBUG1 {refused} "
              f"2>>{shlex.quote(str(log_file))}"]
    with OpenSSHServer(address(), config=config) as server:
        sock, session = connect(server)
        sftp = session.sftp_init()
        with sftp.open(str(tmp_path / "big"), LIBSSH2_FXF_READ, 0) as fh:
            assert b"".join(chunk for _, chunk in fh) == data   # ssh2-python's idiom
        with sftp.open(str(tmp_path / "big"), LIBSSH2_FXF_READ, 0) as fh:
            buf = bytearray(1 << 20)
            got = bytearray()
            while (n := fh.read_into(buf)) > 0:
                got += buf[:n]
            assert got == data
        sock.close()
    sizes = [int(n) for n in re.findall(r'read "[^"]*" \(handle \d+\) off \d+ len (\d+)',
                                        log_file.read_text())]
    assert max(sizes) == largest


_READS = re.compile(r'read "[^"]*" \(handle \d+\) off (\d+) len (\d+)')
MIB = 1 << 20
# One read request's largest size against OpenSSH (its limits@openssh.com answer).
REQUEST = 261120
# Passes the server's replies on at ~12 MB/s: a slow network path.
_THROTTLE = ("import os, sys, time\n"
             "while data := os.read(0, 65536):\n"
             "    sys.stdout.buffer.write(data); sys.stdout.buffer.flush(); time.sleep(0.005)\n")


def _answered(server) -> bool:
    """Whether the server has answered every request it was sent: sftp-server and sshd's
    session process wait in poll (the requests taken from the socket and the pipe, the
    replies sent on), seen on two looks in a row. (The shell that runs sftp-server only
    waits for it.)"""
    waiting_in = ("poll", "ppoll", "select", "pselect6")

    def idle() -> bool:
        calls = {}
        for pid in _descendants(server.process.pid):
            program = os.path.basename(cmdline(pid).split(b"\0")[0])
            if program not in (b"bash", b"sh"):
                calls[program] = (in_syscall(pid, pid) or (None,))[0]
        return b"sftp-server" in calls and all(c in waiting_in for c in calls.values())
    if not idle():
        return False
    time.sleep(0.05)
    return idle()


def _requested_ahead(tmp_path, subsystem_tail, slow_reader):
    """Read 8 MiB of a 16 MiB file, then stop: how far past those 8 MiB the client had
    asked the server to read. A ``slow_reader`` reads 1 MiB at a time, and only once the
    server has answered all it was asked and every answer is in the client's socket
    (whatever the machine's load); otherwise it reads 2 MiB at a time, at once."""
    (tmp_path / "big").write_bytes(os.urandom(16 * MIB))
    log_file = tmp_path / "sftp.log"
    config = [f"Subsystem sftp {SFTP_SERVER} -e -l DEBUG1 2>>{shlex.quote(str(log_file))}"
              f"{subsystem_tail}"]
    with OpenSSHServer(address(), config=config) as server:
        sock, session = connect(server, receive_buffer=_ALL_ANSWERS if slow_reader else None)
        sftp = session.sftp_init()
        consumed = 0
        with sftp.open(str(tmp_path / "big"), LIBSSH2_FXF_READ, 0) as fh:
            while consumed < 8 * MIB:
                if slow_reader:
                    eventually(lambda: _answered(server) and tcp_unsent(sock) == 0, 30,
                               "every answer in the client's socket")
                size, _ = fh.read(MIB if slow_reader else 2 * MIB)
                assert size > 0
                consumed += size
        sock.close()
        server.wait_for_log(lambda _: bool(_READS.search(log_file.read_text())))
    return max(int(off) + int(n) for off, n in _READS.findall(log_file.read_text())) - consumed


# A receive buffer that holds every answer in flight: with less, the kernel keeps some in
# sshd's socket and sshd keeps the rest, and a read then waits for sshd to run.
_ALL_ANSWERS = 8 * MIB


@pytest.mark.usefixtures("patched_libssh2_and_sftp_server")
def test_a_reader_slower_than_the_server_keeps_a_short_read_ahead(tmp_path):
    # Replies are waiting at every read: more requests in flight would only make
    # sshd queue (and copy) megabytes of replies. 2 MiB ahead, plus the request
    # that crosses that mark; unpatched libssh2 keeps 4 reads = 4 MiB in flight.
    # The reader waits until every answer is in its socket, and reads half of what is
    # in flight: a read as large as the whole read-ahead could take the answers to
    # its own new requests too, leaving the next read nothing waiting; a read that
    # finds nothing waiting rightly lengthens the pipeline.
    assert _requested_ahead(tmp_path, "", slow_reader=True) <= 2 * MIB + REQUEST


@pytest.mark.usefixtures("patched_libssh2_and_sftp_server")
def test_a_reader_waiting_on_a_slow_path_lengthens_its_read_ahead(tmp_path):
    throttle = tmp_path / "throttle.py"
    throttle.write_text(_THROTTLE)
    ahead = _requested_ahead(tmp_path, f" | python3 {shlex.quote(str(throttle))}",
                             slow_reader=False)
    assert ahead > 2 * MIB + REQUEST
    assert ahead <= 8 * MIB + REQUEST   # never more than libssh2's own cap
