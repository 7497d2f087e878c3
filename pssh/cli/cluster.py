"""``pssh run --scheduler``: the run spread over a Dask cluster, shown as a local run is.

Each host's output arrives whole when the host completes (the workers do not
stream lines), so it is shown then: ``[host]``-prefixed lines, a block with
``-i``, a JSON object with ``--json``, files with ``-o``/``-e``. The summary and
exit status are the local run's. Ctrl-C stops the run: the tasks stop the
commands still running on their hosts.
"""
from __future__ import annotations

import os
import sys
from typing import List, Optional

from pssh.cli import options
from pssh.cli.display import Display, HostResult
from pssh.cli.hosts import HostSpec, UsageError
from pssh.config import HostConfig
from pssh.options import ConnectOptions


def execute_on_cluster(args, hosts: List[HostSpec], connect: ConnectOptions, config,
                       display: Display) -> int:
    try:
        from pssh.clients.cluster import run_on_cluster
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'pssh[dask]' "
                         "(dask and distributed)") from None
    results: List[Optional[HostResult]] = [None] * len(hosts)
    with display:
        try:
            run = run_on_cluster(args.scheduler, [h.host for h in hosts], args.command,
                                 host_config=[HostConfig(user=h.user, port=h.port)
                                              for h in hosts],
                                 ssh_config=config, sudo=args.sudo, idempotent=args.idempotent,
                                 pool_size=args.parallel, **connect.given())
        except OSError as err:  # no scheduler at that address
            raise UsageError(f"cannot reach the Dask scheduler {args.scheduler}: {err}") \
                from None
        with run:
            try:
                for outcome in run:
                    results[outcome.index] = _show(args, display, outcome)
            except KeyboardInterrupt:
                sys.stderr.write("pssh: interrupted: stopping the commands still running\n")
                run.stop()
                raise
    display.summary([r for r in results if r is not None])
    return options.EXIT_OK if all(r is not None and r.ok for r in results) \
        else options.EXIT_HOSTS_FAILED


def _show(args, display: Display, outcome) -> HostResult:
    from pssh import exceptions as exc
    result = HostResult(outcome.host, exit_code=outcome.exit_code, duration=outcome.duration,
                        stdout=outcome.stdout.split("\n") if outcome.stdout else [],
                        stderr=outcome.stderr.split("\n") if outcome.stderr else [])
    if outcome.exception is not None:
        err = outcome.exception
        result.error = err.reason if isinstance(err, exc.PSSHError) else str(err)
    elif outcome.exit_code is None:
        result.error = (f"killed by signal {outcome.exit_signal}" if outcome.exit_signal
                        else "no exit status")
    display.host_started()
    display.host_finished(result)
    for directory, lines in ((args.outdir, result.stdout), (args.errdir, result.stderr)):
        if directory:
            with open(os.path.join(directory, result.host), "w", encoding="utf-8") as fh:
                fh.writelines(line + "\n" for line in lines)
    if args.json:
        display.json(result)
    elif args.inline:
        display.block(result, display.done)
    elif not (args.outdir or args.errdir):
        for stderr, lines in ((False, result.stdout), (True, result.stderr)):
            for line in lines:
                display.line(result.host, line, stderr)
    return result
