"""Threads: one session shared by several threads, and parallel sessions."""
import hashlib
import os
import threading

from conftest import connect, run


def test_one_session_shared_by_threads(session):
    results, errors = {}, []

    def worker(n):
        try:
            for i in range(15):
                status, out, _ = run(session, f"echo {n}-{i}; exit {i % 3}")
                assert (status, out) == (i % 3, f"{n}-{i}\n".encode())
            results[n] = True
        except Exception as err:  # reported below with its thread
            errors.append((n, err))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(results) == [0, 1, 2, 3]


def test_sessions_in_parallel_threads_download(servers, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(8 << 20))
    digest = hashlib.sha256(src.read_bytes()).digest()
    errors = []

    def worker(n):
        try:
            server = servers.servers[n % len(servers.servers)]
            sock, session = connect(server)
            sftp = session.sftp_init()
            dest = tmp_path / f"dest{n}"
            sftp.download(str(src), dest)
            assert hashlib.sha256(dest.read_bytes()).digest() == digest
            sock.close()
        except Exception as err:
            errors.append((n, err))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
