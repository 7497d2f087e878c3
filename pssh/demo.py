"""Run one command on many local OpenSSH hosts with ParallelSSHClient.

    python -m pssh.demo [--hosts N] [--] [COMMAND]

Starts N real sshd hosts on 127.0.0.1..N (see :mod:`pssh.sshd`), runs the
command on all of them at once on gevent with host keys verified strictly
against a known_hosts file, prints each host's output as it finishes, then a
summary. Stand-in for the ``pssh`` command line until it lands.
"""
from __future__ import annotations

import argparse
import sys
import time

from pssh.clients import ParallelSSHClient
from pssh.sshd import ServerGroup


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pssh.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=20, help="number of local hosts (default 20)")
    parser.add_argument("--timeout", type=float, default=30, help="connect/auth timeout, seconds")
    parser.add_argument("command", nargs="*", default=['uname -sr; echo "$SSH_CONNECTION"'])
    args = parser.parse_args(argv)
    command = " ".join(args.command)

    print(f"starting {args.hosts} local sshd hosts ...", file=sys.stderr)
    with ServerGroup(args.hosts) as group:
        client = ParallelSSHClient(group.hosts, port=group.port, pkey=group.keys.private(),
                                   known_hosts=group.known_hosts_file(), host_key_policy="strict",
                                   allow_agent=False, identity_auth=False, timeout=args.timeout)
        started = time.monotonic()
        output = client.run_command(command, stop_on_errors=False)
        finished = {}
        for host_output in client.as_completed(output):
            finished[host_output.host] = time.monotonic() - started
            for line in host_output.stdout:
                print(f"[{host_output.host}] {line}")
            for line in host_output.stderr:
                print(f"[{host_output.host}] stderr: {line}")
            if host_output.exception:
                print(f"[{host_output.host}] ERROR {host_output.exception}")
        wall = time.monotonic() - started
        client.disconnect()

    failed = [o for o in output if o.exception or o.exit_code != 0]
    print(f"\n{'host':<14} {'status':<8} {'exit':>4} {'seconds':>8}")
    for o in sorted(output, key=lambda o: (o in failed) is False):
        status = "error" if o.exception else ("ok" if o.exit_code == 0 else "failed")
        exit_code = "-" if o.exit_code is None else str(o.exit_code)
        print(f"{o.host:<14} {status:<8} {exit_code:>4} {finished.get(o.host, wall):8.3f}")
    print(f"\n{len(output) - len(failed)}/{len(output)} hosts succeeded in {wall:.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
