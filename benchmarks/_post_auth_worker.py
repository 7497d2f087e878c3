"""Time the first channel opened right after authentication, in its own process.

    python _post_auth_worker.py LIBRARY HOST PORT USER KEY RUNS

Prints a JSON list of milliseconds, one per fresh connection. LIBRARY:
``ssh2-blocking`` (the raw ``ssh2`` API in blocking mode, ours or
ssh2-python, whichever ``ssh2`` this interpreter imports),
``ssh2-nonblocking`` (the same with ``set_blocking(False)`` and a plain
``select()`` loop, no socket options of the caller's) or ``paramiko``
(asyncssh is left out: its channel open always carries a shell or exec
request, so it cannot be timed alone). Imports nothing of this project, so
that it runs under a peer's virtualenv.
"""
import json
import select
import socket
import sys
import time


def _ssh2(host, port, user, key, blocking):
    from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
    from ssh2.session import Session

    def call(fn, *args):
        while True:
            result = fn(*args)
            if blocking or not (type(result) is int and result == LIBSSH2_ERROR_EAGAIN):
                return result
            select.select([sock], [], [], 10)

    with socket.create_connection((host, port)) as sock:
        session = Session()
        session.set_blocking(blocking)
        call(session.handshake, sock)
        call(session.userauth_publickey_fromfile, user, key)
        started = time.perf_counter()
        call(session.open_session)
        return time.perf_counter() - started


def _paramiko(host, port, user, key):
    import paramiko
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(host, port, user, key_filename=key, look_for_keys=False, allow_agent=False)
    try:
        started = time.perf_counter()
        client.get_transport().open_session()
        return time.perf_counter() - started
    finally:
        client.close()


def main() -> None:
    library, host, port, user, key, runs = sys.argv[1:7]
    once = {
        "ssh2-blocking": lambda: _ssh2(host, int(port), user, key, True),
        "ssh2-nonblocking": lambda: _ssh2(host, int(port), user, key, False),
        "paramiko": lambda: _paramiko(host, int(port), user, key),
    }[library]
    print(json.dumps([once() * 1000 for _ in range(int(runs))]))


if __name__ == "__main__":
    main()
