"""One timed SFTP download, run in its own process: prints JSON {seconds, bytes}.

    python _sftp_worker.py LIBRARY CIPHER HOST PORT USER KEY REMOTE_PATH [THREADS]

LIBRARY: ours | ours-iter | ours-aio | ssh2-python | paramiko | asyncssh | hussh |
hussh-aio | openssh (``ssh host cat``) | openssh-sftp. CIPHER: a cipher
name, or "default" for the library's own choice. Runs under whichever
interpreter has the library (ssh2-python needs its own virtualenv, its module
is also called ssh2). Data is read into memory and discarded.
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time

CHUNK = 2 * 1024 * 1024


def _ssh2_api(cipher, host, port, user, key, path, bulk):
    """The ssh2 API, shared by ours and ssh2-python (whichever ``ssh2`` is importable)."""
    import socket

    from ssh2.session import LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC, Session
    from ssh2.sftp import LIBSSH2_FXF_READ
    sock = socket.create_connection((host, port))
    session = Session()
    if cipher != "default":
        session.method_pref(LIBSSH2_METHOD_CRYPT_CS, cipher)
        session.method_pref(LIBSSH2_METHOD_CRYPT_SC, cipher)
    session.handshake(sock)
    session.userauth_publickey_fromfile(user, key)
    sftp = session.sftp_init()
    total = 0
    started = time.perf_counter()
    with sftp.open(path, LIBSSH2_FXF_READ, 0) as fh:
        if bulk:  # ours: read into one reused buffer
            buf = bytearray(CHUNK)
            while (n := fh.read_into(buf)) > 0:
                total += n
        else:  # ssh2-python's documented idiom, a new bytes object per chunk
            for size, _data in fh:
                total += size
    return time.perf_counter() - started, total


def ours(*args):
    return _ssh2_api(*args, bulk=True)


def ssh2_python(*args):
    return _ssh2_api(*args, bulk=False)


def ours_iter(*args):
    """Ours running ssh2-python's code unchanged: what a user who switches gets."""
    return _ssh2_api(*args, bulk=False)


def paramiko_(cipher, host, port, user, key, path):
    import paramiko
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    kwargs = {}
    if cipher != "default":
        preferred = paramiko.Transport._preferred_ciphers
        kwargs["disabled_algorithms"] = {"ciphers": [c for c in preferred if c != cipher]}
    client.connect(host, port, user, key_filename=key, look_for_keys=False, allow_agent=False,
                   **kwargs)
    sftp = client.open_sftp()
    total = 0
    started = time.perf_counter()
    with sftp.open(path, "rb") as fh:
        fh.prefetch()
        while data := fh.read(CHUNK):
            total += len(data)
    return time.perf_counter() - started, total


def asyncssh_(cipher, host, port, user, key, path):
    import asyncio

    import asyncssh

    async def main():
        kwargs = {} if cipher == "default" else {"encryption_algs": [cipher]}
        async with asyncssh.connect(host, port, username=user, client_keys=[key],
                                    known_hosts=None, **kwargs) as conn:
            async with conn.start_sftp_client() as sftp:
                total = 0
                started = time.perf_counter()
                async with sftp.open(path, "rb", block_size=256 * 1024) as fh:
                    while data := await fh.read(CHUNK):
                        total += len(data)
                return time.perf_counter() - started, total

    return asyncio.run(main())


def ours_aio(cipher, host, port, user, key, path):
    """pssh.aio's file object, read as asyncssh's is above."""
    import asyncio

    from pssh import aio
    algs = {} if cipher == "default" else {"encryption_algs": [cipher]}

    async def main():
        async with aio.connect(host, port, username=user, client_keys=[key], known_hosts=None,
                               agent_path=None, **algs) as conn:
            async with conn.start_sftp_client() as sftp:
                total = 0
                started = time.perf_counter()
                async with sftp.open(path, "rb") as fh:
                    while data := await fh.read(CHUNK):
                        total += len(data)
                return time.perf_counter() - started, total

    return asyncio.run(main())


def ours_client(cipher, host, port, user, key, path):
    """The gevent client's copy_remote_file (a whole-file download to /dev/null's side: a
    temporary file beside a target in /tmp, removed after)."""
    import os
    import tempfile

    from pssh.clients import SSHClient
    options = {} if cipher == "default" else {"ciphers": cipher}
    client = SSHClient(host, port=port, user=user, pkey=key, allow_agent=False,
                       identity_auth=False, host_key_policy="off", num_retries=1, **options)
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "copy")
        started = time.perf_counter()
        client.copy_remote_file(path, target)
        seconds = time.perf_counter() - started
        total = os.path.getsize(target)
    client.close()
    return seconds, total


class CipherNotOffered(Exception):
    """The library has no way to pin the cipher asked for."""


def hussh_sync(cipher, host, port, user, key, path):
    """hussh's Connection (libssh2 underneath); it returns file contents as text,
    so the bytes go to /dev/null through its ``local_path``."""
    import hussh
    if cipher != "default":
        raise CipherNotOffered(cipher)
    conn = hussh.Connection(host, port=port, username=user, private_key=key)
    started = time.perf_counter()
    conn.sftp_read(path, "/dev/null")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds, os.path.getsize(path)


def hussh_aio(cipher, host, port, user, key, path):
    """hussh's asyncio AsyncConnection (russh underneath)."""
    import asyncio

    from hussh.aio import AsyncConnection
    if cipher != "default":
        raise CipherNotOffered(cipher)

    async def main():
        conn = AsyncConnection(host, username=user, key_path=key, port=port)
        await conn.connect()
        started = time.perf_counter()
        await conn.sftp_read(path, "/dev/null")
        seconds = time.perf_counter() - started
        await conn.close()
        return seconds, os.path.getsize(path)

    return asyncio.run(main())


def _openssh_options(cipher, key):
    args = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-i", key]
    return args + (["-c", cipher] if cipher != "default" else [])


def _minus_setup(command, stdin=None):
    """Seconds ``command`` takes beyond its connection set-up (timed apart and subtracted)."""
    setup_start = time.perf_counter()
    subprocess.run(command("true"), check=True, input=stdin and b"bye\n",
                   stdout=subprocess.DEVNULL)
    setup = time.perf_counter() - setup_start
    started = time.perf_counter()
    subprocess.run(command(None), check=True, input=stdin, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started - setup


def openssh(cipher, host, port, user, key, path):
    """``ssh host cat file``: the channel's own limit, no SFTP protocol."""
    args = ["ssh", *_openssh_options(cipher, key), "-p", str(port), f"{user}@{host}"]
    seconds = _minus_setup(lambda idle: args + [idle or f"cat {path}"])
    return seconds, os.path.getsize(path)


def openssh_sftp(cipher, host, port, user, key, path):
    """OpenSSH's own ``sftp`` client (64 requests of 32 KiB in flight by default)."""
    args = ["sftp", *_openssh_options(cipher, key), "-P", str(port), "-b", "-", f"{user}@{host}"]
    seconds = _minus_setup(lambda idle: args, f"get {path} /dev/null\n".encode())
    return seconds, os.path.getsize(path)


LIBRARIES = {"ours": ours, "ours-iter": ours_iter, "ours-aio": ours_aio,
             "ours-client": ours_client, "ssh2-python": ssh2_python,
             "paramiko": paramiko_,
             "asyncssh": asyncssh_, "hussh": hussh_sync, "hussh-aio": hussh_aio,
             "openssh": openssh, "openssh-sftp": openssh_sftp}


def gil_probe(fn, args):
    """Python-loop speed in a second thread during a download, relative to idle."""
    def counter(stop, counts):
        n, started = 0, time.perf_counter()
        while not stop.is_set():
            n += 1
        counts.append(n / (time.perf_counter() - started))

    def measure(work):
        counts, stop = [], threading.Event()
        thread = threading.Thread(target=counter, args=(stop, counts))
        thread.start()
        result = work()
        stop.set()
        thread.join()
        return counts[0], result

    idle, _ = measure(lambda: time.sleep(0.5))
    busy, (seconds, total) = measure(lambda: fn(*args))
    return seconds, total, busy / idle


def main():
    library, cipher, host, port, user, key, path = sys.argv[1:8]
    threads = int(sys.argv[8]) if len(sys.argv) > 8 else 1
    try:
        measure(LIBRARIES[library], cipher, host, port, user, key, path, threads)
    except CipherNotOffered:
        print(json.dumps({"skipped": f"{library} cannot pin {cipher}"}))


def measure(fn, cipher, host, port, user, key, path, threads):
    if threads == 0:
        seconds, total, share = gil_probe(fn, (cipher, host, int(port), user, key, path))
        print(json.dumps({"seconds": seconds, "bytes": total, "cpu": 0, "python_share": share}))
        return
    cpu_before = _cpu()
    if threads == 1:
        seconds, total = fn(cipher, host, int(port), user, key, path)
    else:
        results = []
        runners = [threading.Thread(target=lambda: results.append(
            fn(cipher, host, int(port), user, key, path))) for _ in range(threads)]
        started = time.perf_counter()
        for t in runners:
            t.start()
        for t in runners:
            t.join()
        seconds = time.perf_counter() - started
        total = sum(r[1] for r in results)
    # Client CPU (this process and, for openssh, its ssh children), set-up included.
    print(json.dumps({"seconds": seconds, "bytes": total, "cpu": _cpu() - cpu_before}))


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
