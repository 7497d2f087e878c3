"""One timed fan-out in its own process: prints JSON {wall, cpu, import_cpu, import_wall,
maxrss_kib, ok}.

    python _fanout_worker.py [--known-hosts=FILE] LIBRARY HOSTS PORT USER KEY COMMAND [POOL]

Connects to every host in HOSTS (comma-separated), authenticates with KEY,
runs COMMAND, reads all output and the exit code; ``wall`` covers all of it.
Host keys are not checked by any library here (same work for all), unless
``--known-hosts`` names a file: then our libraries (ours, ours-native,
ours-aio) check them against it, strictly (an unknown host is refused), and
the peers still do not. POOL:
how many hosts at once (ours: pool_size; paramiko: threads); default all
hosts for ours, min(50, hosts) threads for paramiko. The library's modules are
imported first and timed apart (``import_cpu``, ``import_wall``): ``cpu`` is the fan-out alone.

A library that this build does not have (``ours-native`` before
``ParallelSSHClient(runner=...)`` exists) prints ``{"unavailable": REASON}``.
"""
import importlib
import inspect
import json
import resource
import sys
import time


class Unavailable(Exception):
    """The library cannot run in this build."""


def ours(hosts, port, user, key, command, pool=None, known_hosts=None, **runner):
    from pssh.clients import ParallelSSHClient
    checked = {"known_hosts": known_hosts, "host_key_policy": "strict"} if known_hosts \
        else {"host_key_policy": "off"}
    client = ParallelSSHClient(hosts, port=port, user=user, pkey=key, allow_agent=False,
                               identity_auth=False, pool_size=pool or len(hosts), timeout=60,
                               **checked, **runner)
    output = client.run_command(command)
    ok = 0
    for host_output in output:
        for _ in host_output.stdout:
            pass
        client.join([host_output])
        ok += host_output.exit_code == 0
    return ok


def ours_native(hosts, port, user, key, command, pool=None, known_hosts=None):
    """Our parallel client on its native runner (``runner="native"``), where it exists."""
    from pssh.clients import ParallelSSHClient
    if "runner" not in inspect.signature(ParallelSSHClient).parameters:
        raise Unavailable("ParallelSSHClient has no runner= keyword in this build")
    return ours(hosts, port, user, key, command, pool, known_hosts, runner="native")


def ours_aio(hosts, port, user, key, command, pool=None, known_hosts=None):
    """pssh.aio on the default asyncio loop: every host at once (or ``pool`` at a time)."""
    import asyncio

    from pssh import aio

    async def main():
        results = await aio.gather_hosts(hosts, command, limit=pool or len(hosts), port=port,
                                         username=user, client_keys=[key],
                                         known_hosts=known_hosts,
                                         agent_path=None, timeout=60)
        return sum(r.ok for r in results)

    return asyncio.run(main())


def hussh_aio(hosts, port, user, key, command):
    """hussh's AsyncConnection (russh on tokio), one per host, gathered."""
    import asyncio

    from hussh.aio import AsyncConnection

    async def one(host):
        conn = AsyncConnection(host, username=user, key_path=key, port=port)
        await conn.connect()
        result = await conn.execute(command)
        await conn.close()
        return result.status == 0

    async def main():
        return sum(await asyncio.gather(*(one(h) for h in hosts)))

    return asyncio.run(main())


def parallel_ssh(hosts, port, user, key, command):
    from pssh.clients import ParallelSSHClient
    client = ParallelSSHClient(hosts, port=port, user=user, pkey=key, allow_agent=False,
                               identity_auth=False, pool_size=len(hosts), timeout=60)
    output = client.run_command(command)
    client.join(output)
    ok = 0
    for host_output in output:
        for _ in host_output.stdout:
            pass
        ok += host_output.exit_code == 0
    return ok


def asyncssh_(hosts, port, user, key, command):
    import asyncio

    import asyncssh

    async def one(host):
        async with asyncssh.connect(host, port, username=user, client_keys=[key],
                                    known_hosts=None, agent_path=None) as conn:
            result = await conn.run(command)
            return result.exit_status == 0

    async def main():
        return sum(await asyncio.gather(*(one(h) for h in hosts)))

    return asyncio.run(main())


def paramiko_(hosts, port, user, key, command, pool=None):
    from concurrent.futures import ThreadPoolExecutor

    import paramiko

    def one(host):
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect(host, port, user, key_filename=key, look_for_keys=False,
                       allow_agent=False)
        _, stdout, _ = client.exec_command(command)
        stdout.read()
        ok = stdout.channel.recv_exit_status() == 0
        client.close()
        return ok

    with ThreadPoolExecutor(max_workers=pool or min(50, len(hosts))) as executor:
        return sum(executor.map(one, hosts))


def fabric_(hosts, port, user, key, command):
    from fabric import ThreadingGroup
    group = ThreadingGroup(*hosts, port=port, user=user,
                           connect_kwargs={"key_filename": key, "look_for_keys": False,
                                           "allow_agent": False})
    results = group.run(command, hide=True, warn=True)
    return sum(r.exited == 0 for r in results.values())


def hussh_(hosts, port, user, key, command):
    """hussh's MultiConnection (russh on tokio): one command on every host.
    Its results are keyed by host name, so a host listed twice counts once."""
    from hussh.multi_conn import MultiConnection
    conns = MultiConnection.from_shared_auth(hosts, username=user, key_path=key, port=port,
                                             batch_size=len(hosts))
    conns.connect()
    results = conns.execute(command)
    ok = sum(result.status == 0 for result in results.values())
    conns.close()
    return ok


LIBRARIES = {"ours": ours, "ours-native": ours_native, "ours-aio": ours_aio,
             "parallel-ssh": parallel_ssh,
             "asyncssh": asyncssh_, "paramiko": paramiko_, "fabric": fabric_, "hussh": hussh_,
             "hussh-aio": hussh_aio}
# What each library loads before it can start: interpreter start-up apart.
IMPORTS = {"ours": ["pssh.clients"], "ours-native": ["pssh.clients"],
           "ours-aio": ["asyncio", "pssh.aio"],
           "parallel-ssh": ["pssh.clients"], "hussh-aio": ["asyncio", "hussh.aio"],
           "asyncssh": ["asyncio", "asyncssh"], "paramiko": ["paramiko"], "fabric": ["fabric"],
           "hussh": ["hussh.multi_conn"]}


def _cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: The libraries that take ``--known-hosts`` (and then check host keys).
CHECK_HOST_KEYS = ("ours", "ours-native", "ours-aio")


def main():
    argv = [arg for arg in sys.argv[1:] if not arg.startswith("--known-hosts=")]
    known_hosts = [arg.partition("=")[2] for arg in sys.argv[1:]
                   if arg.startswith("--known-hosts=")]
    library, hosts, port, user, key, command = argv[:6]
    hosts = hosts.split(",")
    extra = {"pool": int(argv[6])} if len(argv) > 6 else {}
    if known_hosts and library in CHECK_HOST_KEYS:
        extra["known_hosts"] = known_hosts[-1]
    before_import, import_started = _cpu(), time.perf_counter()
    for module in IMPORTS[library]:
        importlib.import_module(module)
    before, started = _cpu(), time.perf_counter()
    import_wall = started - import_started
    try:
        ok = LIBRARIES[library](hosts, int(port), user, key, command, **extra)
    except Unavailable as err:
        print(json.dumps({"unavailable": str(err)}))
        return
    wall = time.perf_counter() - started
    cpu = _cpu() - before
    print(json.dumps({"wall": wall, "cpu": cpu, "import_cpu": before - before_import,
                      "import_wall": import_wall,
                      "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "ok": ok}))


if __name__ == "__main__":
    main()
