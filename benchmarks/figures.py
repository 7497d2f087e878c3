"""Every benchmark figure of README.md and docs/*.md, generated from the stored results.

    python -m benchmarks.figures [--root DIR]            # rewrite the marked blocks
    python -m benchmarks.figures --check [--root DIR]    # exit 1 if a block differs

(from the repository root, or with ``--root`` naming it).

The results the documentation shows are kept once, in ``benchmarks/results/*.json`` (one file
per benchmark run, with the command that produced it). A figure appears in a page only
inside a marked block::

    <!-- figures:NAME -->
    ...generated text...
    <!-- /figures -->

and this module writes each block's text from the results, so the README's summary and the
benchmark page can never disagree: a figure typed by hand into a block is overwritten, and
``--check`` (run by tests/test_figures.py) fails until the page is regenerated.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from benchmarks import cpu_parts

RESULTS = Path(__file__).resolve().parent / "results"
#: The pages that may hold blocks, relative to the repository root.
PAGE_GLOBS = ("README.md", "docs/*.md", "docs/**/*.md")
# A block may be indented (inside a list item): its text is indented the same.
BLOCK = re.compile(r"^(?P<indent>[ ]*)(?P<open><!-- figures:(?P<name>[a-z0-9-]+) -->\n)"
                   r"(?P<body>.*?)^(?P=indent)(?P<close><!-- /figures -->)", re.S | re.M)


def load(name: str) -> dict:
    """One stored result: ``benchmarks/results/NAME.json``."""
    return json.loads((RESULTS / f"{name}.json").read_text())


def number(value: Optional[float], decimals: int = 0, missing: str = "n/a") -> str:
    """A figure as the pages print it: thousands separated, fixed decimals."""
    return missing if value is None else f"{value:,.{decimals}f}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], first_left: bool = True,
          numbers_right: bool = True) -> str:
    """A Markdown table: the first column left-aligned (unless not ``first_left``), the others
    right-aligned as numbers (unless not ``numbers_right``)."""
    align = ["---" if (first_left and i == 0) or not numbers_right else "---:"
             for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def bold(text: str) -> str:
    return f"**{text}**"


def prose(text: str, indent: str = "") -> str:
    """A paragraph wrapped to the pages' 100 columns (``indent`` for a list item's lines)."""
    return textwrap.fill(text, width=100, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def _times(value: Optional[float], decimals: int = 2) -> str:
    return f"{number(value, decimals)}×" if value is not None else "n/a"


def _at_scale(by_hosts: Dict[str, list], index: int, least: int = 100) -> List[float]:
    """Column ``index`` of the rows for H >= ``least``."""
    return [row[index] for hosts, row in by_hosts.items() if int(hosts) >= least]


def _span(values: Sequence[float], decimals: int = 2) -> str:
    low, high = number(min(values), decimals), number(max(values), decimals)
    return low if low == high else f"{low}-{high}"


# --- the ramp ----------------------------------------------------------------------------

def ramp_operations() -> str:
    """Median per operation over every session of the run, and the speed-up over paramiko."""
    ramp = load("ramp")
    libs = ramp["libraries"]
    others = [lib for lib in libs if lib != "paramiko"]
    rows = []
    for op, medians in ramp["median_ms"].items():
        cells = [op] + [f"{number(medians[lib], ramp['decimals'][op])} ms"
                        if medians[lib] is not None else "n/a" for lib in libs]
        speedups = ramp["speedup_vs_paramiko"][op]
        cells += [f"{number(speedups[lib], 2)}x" if speedups[lib] is not None else "n/a"
                  for lib in others]
        rows.append(cells)
    header = ["operation", *libs, *(f"{lib} vs paramiko" for lib in others)]
    low, high = ramp["sessions_per_library"]
    failed = ramp["failed_sessions"]
    return (prose(f"**Results** (run `{ramp['run']}`, {ramp['seconds_per_step']} s per step "
                  f"and library; {number(low)} to {number(high)} sessions per library; "
                  f"ssh2-python failed {failed['ssh2-python']} sessions: {failed['why']}).")
            + "\n\n" + prose("Median per operation over every session of the run, and the "
                             "speed-up over paramiko (paramiko's median / the library's; > 1 is "
                             "faster):")
            + "\n\n" + table(header, rows))


def ramp_against_the_post() -> str:
    """How the 2017 post's 10x gap between paramiko and the libssh2 bindings looks today."""
    speedups = load("ramp")["speedup_vs_paramiko"]
    bindings = ("ours-blocking", "ours-nonblocking", "ssh2-python")
    channel = [speedups[op][lib] for op in ("channel_open", "channel_read") for lib in bindings]
    ours_sftp = [speedups["sftp_read"][lib] for lib in ("ours-blocking", "ours-nonblocking")]
    return prose(
        "The gap is gone for the channel operations (`channel_open`, `channel_read`: "
        f"{_span(channel)}x paramiko's speed for the bindings); it remains "
        f"{number(speedups['auth']['ssh2-python'], 2)}x for `auth` and "
        f"{number(speedups['sftp_read']['ssh2-python'], 2)}x for `sftp_read` between paramiko "
        f"5.1 and ssh2-python here, and {_span(ours_sftp)}x between paramiko and ours for "
        "`sftp_read`.")


def ramp_close() -> str:
    closes = load("ramp")["median_ms"]["close_and_exit_status"]
    others = [v for lib, v in closes.items() if lib != "paramiko" and v is not None]
    return prose(
        "- `close_and_exit_status`: paramiko has the exit status already in hand when "
        f"`channel_read` ends (median {number(closes['paramiko'], 2)} ms); the others spend "
        f"{_span(others)} ms on the close exchange.", indent="  ")


def ramp_channel_open() -> str:
    """The first channel after authentication: slow in the ramp run, fixed since."""
    ramp, stall = load("ramp"), load("post_auth_stall")
    opens = ramp["median_ms"]["channel_open"].values()
    ours = [row for row in stall["rows"] if row["ours"]]
    peers = [row["median_ms"] for row in stall["rows"] if not row["ours"]]
    return prose(
        f"- `channel_open` took {number(min(opens), 1)}-{number(max(opens), 1)} ms for every "
        f"library in this run (`{ramp['run']}`): the first channel after authentication met "
        "sshd's Nagle and the client's delayed ACK, and the raw `ssh2` API could not avoid it "
        "then (libssh2 waits inside C). Since that run our `Session` sets TCP_QUICKACK itself: "
        "the first channel now takes "
        + " and ".join(f"{number(row['median_ms'], 1)} ms {row['mode']}" for row in ours)
        + f" against {number(min(peers), 1)}-{number(max(peers), 1)} ms for ssh2-python and "
        "paramiko (\"First channel after authentication\" below), so a ramp run today shows "
        "ours' `channel_open` in milliseconds and the others' still in the tens of "
        "milliseconds.", indent="  ")


def post_auth_stall() -> str:
    stall = load("post_auth_stall")
    rows = []
    for row in stall["rows"]:
        median = f"{number(row['median_ms'], 1)} ms"
        rows.append([row["client"], bold(median) if row["ours"] else median,
                     f"{number(row['max_ms'], 1)} ms"])
    return table(["client", "first channel after auth, median", "max"], rows)


# --- single-stream SFTP ---------------------------------------------------------------------

def sftp_results() -> str:
    sftp = load("sftp_throughput")
    rows = []
    for row in sftp["rows"]:
        cells = [number(v, missing=row.get("missing", "n/a") if i == 1 else "n/a")
                 for i, v in enumerate(row["mb_s"])]
        if row["library"] == "ours":
            cells = [bold(c) for c in cells]
        rows.append([row["library"], *cells])
    cpu = ", ".join(
        f"{row['library']} " + " / ".join(number(v) for v in row["cpu_ms"] if v is not None)
        for row in sftp["rows"])
    return (prose(f"**Results** (run of {sftp['run']}, `{sftp['command']}`, median of 7 rounds, "
                  "MB/s):") + "\n\n" + table(["library", *sftp["ciphers"]], rows) + "\n\n"
            + prose("Client CPU per 100 MB (ms, process start-up and login included; "
                    f"{' / '.join(sftp['ciphers'])} where the library has them): {cpu}."))


# --- fan-out at 50 ms ---------------------------------------------------------------------

def fanout_rtt50() -> str:
    fan = load("fanout_rtt50")
    libs = fan["libraries"]
    rows = []
    for hosts, walls in fan["wall_s"].items():
        cells = [hosts] + [number(walls[lib], 3, "n/a") + (" s" if walls[lib] is not None
                                                           else "") for lib in libs]
        cells[1] = bold(cells[1])
        rows.append(cells + [f"{number(walls['ours / asyncssh'], 2)}×"])
    header = ["H", *("paramiko (50 threads)" if lib == "paramiko" else lib for lib in libs),
              "ours / asyncssh"]
    at_500 = fan["at_500"]
    cpu_rows = [[lib, (bold if lib == "ours" else str)(f"{number(v['cpu_ms_per_host'], 2)} ms"),
                 f"{v['peak_rss_mib']} MiB"] for lib, v in at_500.items()]
    return (f"**Results** (run of {fan['run']}; wall time, median of 3 rounds, all libraries "
            "in one run):\n\n" + table(header, rows, first_left=False) + "\n\n"
            + table(["at H = 500", "client CPU per host", "peak RSS"], cpu_rows))


def fanout_rtt50_reading() -> str:
    fan = load("fanout_rtt50")
    walls = fan["wall_s"]
    at_scale = {h: w for h, w in walls.items() if int(h) >= 100}
    post = fan["parallel_ssh_in_the_post_that_motivated_this_benchmark_s"]
    peers_one = [v for lib, v in walls["1"].items() if lib not in ("ours", "ours / asyncssh")
                 and v is not None]
    ratios = [w["ours / asyncssh"] for w in at_scale.values()]
    theirs = " / ".join(number(w["parallel-ssh"], 1) for w in at_scale.values())
    return prose(
        f"parallel-ssh's figures ({theirs} s) repeat the ones that motivated this benchmark "
        f"({' / '.join(number(post[h], 1) for h in at_scale)} s): its authentication runs "
        "blocking on the hub, one host at a time, about two round trips each. Ours: one host in "
        f"{number(walls['1']['ours'], 3)} s against ~{_span(peers_one)} s for every peer; "
        f"**{_span(ratios)}× asyncssh at H ≥ 100** in this run. Client CPU per host at H = 500: "
        f"{number(fan['at_500']['ours']['cpu_ms_per_host'], 2)} ms, so the target of ≤ 1 ms per "
        "host is not met.")


# --- the asyncio front end ----------------------------------------------------------------

def aio_fanout() -> str:
    fan = load("asyncio_frontend")["fanout"]
    rows = []
    for hosts, walls in fan["wall_s"].items():
        ratios = [_times(r) for r in fan["ratio"][hosts]]
        if int(hosts) >= 100 and fan["ratio"][hosts][0] <= 0.8:   # the target, met
            ratios[0] = bold(ratios[0])
        rows.append([hosts, *(f"{number(w, 3)} s" if w is not None else "n/a" for w in walls),
                     *ratios])
    cpu_rows = []
    for i, lib in enumerate(fan["cpu_libraries"]):
        cells = []
        for hosts, values in fan["cpu_ms_per_host"].items():
            cell = number(values[i], 2)
            cells.append(bold(cell) if lib == "ours-aio" and int(hosts) >= 100 else cell)
        cpu_rows.append([lib, *cells, number(fan["import_ms"][i])])
    met = [h for h, r in fan["ratio"].items() if int(h) >= 100 and r[0] <= 0.8]
    missed = [h for h, r in fan["ratio"].items() if int(h) >= 100 and r[0] > 0.8]
    missed_text = "".join(
        f", not at {h} ({_times(fan['ratio'][h][0])}: there the {h} logins cost `sshd` most of "
        "both cores and every client waits on it)" for h in missed)
    return (
        prose(f"**Results** ({load('asyncio_frontend')['run']}; medians of 3 rounds, ratios "
              "medians of per-round ratios):") + "\n\n"
        + table(["H", *fan["libraries"], *fan["ratios"]], rows, first_left=False) + "\n\n"
        + table(["client CPU per host (ms, the fan-out alone)",
                 *(f"H={h}" for h in fan["cpu_ms_per_host"]), "import (ms)"], cpu_rows)
        + "\n\n" + prose(
            "Targets of issue 13: wall ≤ 0.8× asyncssh at H ≥ 100 — met at "
            f"{' and '.join(met)}{missed_text}; client CPU per host ≤ 0.5× asyncssh's — met "
            f"({_span(fan['cpu_ours_aio_vs_asyncssh_per_round'])}×); within 10 % of our gevent "
            f"client — met ({_span(_at_scale(fan['ratio'], 1))}×). hussh's `MultiConnection` "
            "keys results by host name, so H = 500 (two connections to each of 250 addresses) "
            "has no figure for it."))


def aio_rtt50() -> str:
    fan = load("asyncio_frontend")["fanout_rtt50"]
    rows = []
    for hosts, walls in fan["wall_s"].items():
        cells = [f"{number(w, 3)} s" for w in walls]
        if walls[1] == min(walls):                    # ours-aio the fastest
            cells[1] = bold(cells[1])
        rows.append([hosts, *cells, *(_times(r) for r in fan["ratio"][hosts])])
    cpu = fan["cpu_ms_per_host"]

    def both(lib: str) -> str:
        return " / ".join(number(v, 2) for v in cpu[lib].values())

    per_round = " / ".join(_times(v) for v in fan["cpu_ours_aio_vs_asyncssh_per_round"].values())
    return (
        table(["H", *fan["libraries"], *fan["ratios"]], rows, first_left=False) + "\n\n"
        + prose(f"Client CPU per host at H = {' / '.join(cpu['ours-aio'])}: ours-aio "
                f"{both('ours-aio')} ms, asyncssh {both('asyncssh')} ({per_round}), our gevent "
                f"client {both('ours (gevent)')}, hussh-aio {both('hussh-aio')}. With 50 ms "
                "round trips the 0.8× wall target is missed by a little "
                f"({_span(_at_scale(fan['ratio'], 0))}×): a login needs the same ~9 round trips "
                "in every library, and the client's CPU matters less than on loopback."))


def aio_sftp() -> str:
    sftp = load("asyncio_frontend")["sftp"]
    mb_s, ratio, cpu = sftp["mb_s"], sftp["ours_aio_per_round"], sftp["cpu_ms_per_100mb"]
    return prose(
        f"SFTP, 100 MB, default ciphers, median of 7: ours (bindings, `read_into`) "
        f"{number(mb_s['ours'])} MB/s, **ours-aio {number(mb_s['ours-aio'])} MB/s**, asyncssh "
        f"{number(mb_s['asyncssh'])}, hussh-aio {number(mb_s['hussh-aio'])}, OpenSSH `sftp` "
        f"{number(mb_s['OpenSSH `sftp`'])}. Per-round ratios: ours-aio / ours "
        f"**{_times(ratio['ours'])}** (target: within 10 %), / asyncssh "
        f"**{_times(ratio['asyncssh'])}** (target ≥ 1.3×), / hussh-aio "
        f"{_times(ratio['hussh-aio'])}. Client CPU per 100 MB (start-up and login included): "
        f"ours {number(cpu['ours'])} ms, ours-aio {number(cpu['ours-aio'])} (asyncio and the "
        f"client modules imported, ~{number(sftp['ours_aio_loop_wakeups'])} loop wake-ups), "
        f"asyncssh {number(cpu['asyncssh'])}, hussh-aio {number(cpu['hussh-aio'])}. Before the "
        "driver kept its socket registered between waits (an `epoll_ctl` pair per wait) ours-aio "
        f"ran at {_times(sftp['ours_aio_before_the_driver_kept_its_socket_registered'])} ours.")


def asyncio_speed() -> str:
    runs = load("asyncio_frontend")
    fan, rtt, sftp = runs["fanout"], runs["fanout_rtt50"], runs["sftp"]
    shown = ["100", "200"]
    return prose(
        "Side by side in one run (see [benchmarks.md](benchmarks.md#the-asyncio-front-end)): "
        f"fan-out of `echo` to {' and '.join(shown)} hosts "
        f"{' and '.join(_times(fan['ratio'][h][0]) for h in shown)} asyncssh's wall time at "
        f"{_span(fan['cpu_ours_aio_vs_asyncssh_per_round'])}× its client CPU per host, level "
        f"with our gevent client ({_span(_at_scale(fan['ratio'], 1))}×); at 50 ms round-trip "
        f"time {_span(_at_scale(rtt['ratio'], 0))}× asyncssh (the round trips dominate); a "
        "100 MB SFTP download through `sftp.open(...).read()` at "
        f"{_times(sftp['ours_aio_per_round']['ours'])} the bindings' own bulk path and "
        f"{_times(sftp['ours_aio_per_round']['asyncssh'])} asyncssh.")


# --- scaling out ----------------------------------------------------------------------------

def scaling_table() -> str:
    scaling = load("scaling")
    rows = [[str(r["hosts"]), r["mode"], f"{r['ok']}/{r['hosts']}", number(r["wall_s"], 2),
             f"{number(r['client_cpu_ms_per_host'], 2)} ({number(r['parent_cpu_ms_per_host'], 2)})",
             number(r["sshd_cpu_ms_per_login"], 1), number(r["sshd_bound_limit_s"], 2),
             number(r["wall_over_limit"], 2),
             f"{r['client_peak_rss_mib']} ({r['worker_peak_rss_mib']})",
             f"{number(r['wall_vs_single'], 2)}x"] for r in scaling["rows"]]
    return table(["hosts", "mode", "ok", "wall s", "client CPU ms/host (parent)",
                  "sshd CPU ms/login", "sshd-bound limit s", "wall / limit",
                  "client peak RSS MiB (worker)", "wall vs single"], rows, numbers_right=False)


def scaling_intro() -> str:
    single = [r["client_cpu_ms_per_host"] for r in load("scaling")["rows"]
              if r["mode"] == "single"]
    return prose(
        f"One gevent hub is one core. Our client spends {_span(single, 1)} ms of CPU per host to "
        "connect, log in, run a command and collect its output (more with start-up, keys "
        "without `.pub`, or big outputs), so one process tops out at several hundred logins a "
        "second. Two ways past that, with the API you already use.")


# --- the README's summary -----------------------------------------------------------------

def readme_performance() -> str:
    sftp, ramp, fan = load("sftp_throughput"), load("ramp"), load("fanout_rtt50")
    gcm = {row["library"]: row for row in sftp["rows"]}

    def mb(lib: str) -> str:
        return number(gcm[lib]["mb_s"][0])

    def cpu(lib: str) -> str:
        return number(gcm[lib]["cpu_ms"][0])

    total = ramp["median_ms"]["total"]
    one, five_hundred = fan["wall_s"]["1"], fan["wall_s"]["500"]
    peers_one = [v for lib, v in one.items() if lib not in ("ours", "ours / asyncssh")]
    return prose(
        f"100 MB single-stream SFTP download on a 2-core machine, median of 7 rounds, every "
        f"library side by side in one run ({sftp['run']}): {mb('ours')} MB/s with AES-GCM "
        f"(asyncssh {mb('asyncssh')}, ssh2-python {mb('ssh2-python')}, paramiko "
        f"{mb('paramiko')}, `ssh cat` {mb('OpenSSH `ssh cat`')}), at {cpu('ours')} ms of client "
        f"CPU per 100 MB, start-up and login included (asyncssh {cpu('asyncssh')}, ssh2-python "
        f"{cpu('ssh2-python')}, paramiko {cpu('paramiko')}). In the 2017-style ramp (threads of "
        "whole sessions: auth, exec of `cat`, read, exit status, 11 MB over SFTP; run "
        f"`{ramp['run']}`), a session takes a median {number(total['ours-nonblocking'])}-"
        f"{number(total['ours-blocking'])} ms with ours (non-blocking, blocking) against "
        f"{number(total['asyncssh'])} ms for asyncssh, {number(total['ssh2-python'])} ms for "
        f"ssh2-python and {number(total['paramiko'])} ms for paramiko over all steps from 1 to 50 "
        "threads. Fan-out of `echo` to H hosts with 50 ms round trips (a network namespace "
        "with delayed loopback, `python -m benchmarks.fanout --rtt 50`): one host "
        f"{number(one['ours'], 2)} s (peers {number(min(peers_one), 2)}-"
        f"{number(max(peers_one), 2)} s), 500 hosts {number(five_hundred['ours'], 1)} s "
        f"(asyncssh {number(five_hundred['asyncssh'], 1)}, paramiko "
        f"{number(five_hundred['paramiko'], 1)}, parallel-ssh "
        f"{number(five_hundred['parallel-ssh'], 1)}).")


# --- the bundled libssh2's patches --------------------------------------------------------

def _patch_ratios() -> Dict[str, str]:
    """Each speed-up patch's effect, as a factor ("3.4×") from its stored measurements."""
    patches = load("libssh2_patches")

    def factor(before: float, after: float) -> str:
        return f"{before / after:.1f}×"

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(values)

    read_ahead = patches["0009-sftp-adaptive-read-ahead"]["sessions_per_s"]
    return {
        "aes-gcm": factor(**patches["0001-bulk-cipher-calls"]["cpu_ms_per_100mb"]),
        "chacha20": factor(**patches["0005-chacha20-poly1305-on-evp"]["cpu_ms_per_100mb"]),
        "read-ahead": factor(mean(read_ahead["after"]), mean(read_ahead["before"])),
    }


def readme_patch_effects() -> str:
    patches = load("libssh2_patches")
    ratio = _patch_ratios()
    gcm = patches["0001-bulk-cipher-calls"]
    chacha = patches["0005-chacha20-poly1305-on-evp"]
    logins = patches["0008-openssh-keys-skip-pem-reader"]["cpu_ms_per_login"]
    read_ahead = patches["0009-sftp-adaptive-read-ahead"]

    def login(key: str) -> str:
        return f"{key} {_span(logins[key]['before'])} → {_span(logins[key]['after'])} ms"

    sessions = read_ahead["sessions_per_s"]
    return prose(
        "What the speed-ups measured, each patch against the build without it (details in "
        "[docs/benchmarks.md](docs/benchmarks.md)): `0001` "
        f"{ratio['aes-gcm']} less client CPU for an {gcm['cipher']} download "
        f"({number(gcm['cpu_ms_per_100mb']['before'])} → "
        f"{number(gcm['cpu_ms_per_100mb']['after'])} ms per 100 MB); `0005` {ratio['chacha20']} "
        f"less for {chacha['cipher']} ({number(chacha['cpu_ms_per_100mb']['before'])} → "
        f"{number(chacha['cpu_ms_per_100mb']['after'])} ms); `0008` client CPU per key login "
        f"{login('ed25519')}, {login('ecdsa')}; `0009` {ratio['read-ahead']} the sessions per "
        f"second at {read_ahead['threads']} concurrent downloads ({_span(sessions['before'], 1)} → "
        f"{_span(sessions['after'], 1)} sessions/s).")


def patch_0001_measured() -> str:
    gcm = load("libssh2_patches")["0001-bulk-cipher-calls"]
    cpu, mb_s = gcm["cpu_ms_per_100mb"], gcm["mb_s"]
    return prose(f"Measured, medians: client CPU per 100 MB {number(cpu['before'])} → "
                 f"{number(cpu['after'])} ms, throughput {number(mb_s['before'])} → "
                 f"{number(mb_s['after'])} MB/s ({gcm['cipher']}).")


def patch_0005_measured() -> str:
    chacha = load("libssh2_patches")["0005-chacha20-poly1305-on-evp"]
    cpu, mb_s, later = (chacha["cpu_ms_per_100mb"], chacha["mb_s"],
                        chacha["mb_s_once_0006_was_in"])
    return prose(f"Measured: client CPU per 100 MB {number(cpu['before'])} → "
                 f"{number(cpu['after'])} ms, throughput {number(mb_s['before'])} → "
                 f"{number(mb_s['after'])} MB/s (then {number(later['before'])} → "
                 f"{number(later['after'])} with the next patch).")


def patch_0009_measured() -> str:
    read_ahead = load("libssh2_patches")["0009-sftp-adaptive-read-ahead"]
    sessions = read_ahead["sessions_per_s"]

    def rounds(key: str) -> str:
        return " / ".join(number(v, 1) for v in sessions[key])

    return prose(f"Measured at {read_ahead['threads']} threads: {rounds('after')} sessions/s "
                 f"against {rounds('before')} with the fixed 8 MiB; a fixed 2 MiB cap gave "
                 f"{rounds('fixed_2mib_cap')} but would cap a single download at 2 MiB per round "
                 "trip (40 MB/s at 50 ms).")


def unpatched_cost() -> str:
    ratio = _patch_ratios()
    return prose(
        "A build against a libssh2 without our patches (the system's, or a `LIBSSH2_PREFIX` "
        "without our patches' `patches.sha256`) prints a warning and sets "
        "`ssh2.session.PATCHED_LIBSSH2` (and `HOST_CERTIFICATES`) to False. What is then "
        "missing: OpenSSH host certificates (libssh2 refuses the `*-cert-v01@openssh.com` host "
        "keys), the one-round-trip key login, and the speed-ups: AES-GCM costs "
        f"{ratio['aes-gcm']} and ChaCha20-Poly1305 {ratio['chacha20']} the client CPU, and SFTP "
        "downloads go in 30,000-byte reads; `pssh --version` says \"unpatched\".")


# --- issue 29: client CPU per host, system calls per login, the floor ----------------------

#: Issue 29's targets (measured, never asserted in tests).
CPU_PER_HOST_TARGET_MS = 0.5     # client CPU per host at H = 200
WALL_TARGETS = {"hussh": 0.95, "asyncssh": 0.75}   # ours / peer at H = 100 and 200
SYSCALLS_TARGET = 60             # per login and command
IMPORT_TARGET_S = 0.08           # import pssh.clients


def _ms(value: Optional[float], decimals: int = 2) -> str:
    return number(value, decimals)


def cpu_per_host_tables() -> str:
    run = load("cpu_per_host")
    libs, hosts = run["libraries"], [str(h) for h in run["hosts"]]
    # Ours against each peer; the C floor against hussh (the fastest peer) alone.
    ratios = {name: values for name, values in run["wall_ratio"].items()
              if not name.startswith("floor-c") or name == "floor-c / hussh"}
    rows = []
    for h in hosts:
        cells = [f"{number(run['wall_s'][lib][h], 3)} s" if run["wall_s"][lib][h] is not None
                 else "n/a" for lib in libs]
        for name, values in ratios.items():
            cell = _times(values[h])
            ours, peer = name.split(" / ")
            if int(h) in (100, 200) and values[h] is not None and ours != "floor-c" \
                    and values[h] <= WALL_TARGETS[peer]:
                cell = bold(cell)
            cells.append(cell)
        rows.append([h, *cells])
    cpu_rows = []
    for lib in libs:
        cells = [_ms(run["cpu_ms_per_host"][lib].get(h)) for h in hosts[1:]]
        cpu_rows.append([lib, *cells, _ms(run["import_wall_s"].get(lib), 3),
                         number(run["peak_rss_mib"][lib][hosts[-1]])])
    missing = "".join(f" {lib}: not measured ({why})." for lib, why in run["unavailable"].items())
    load_average = run.get("load_average")
    if load_average:
        missing += (f" The machine's 1-minute load average was {load_average['start']} at the "
                    f"start and {load_average['end']} at the end, on 2 cores (the run's own "
                    "servers and logins count in it, and any other work on the machine): "
                    "compare within this run only.")
    return (prose(f"**Results** (run of {run['run']}; `{run['command']}`; medians of "
                  f"{run['repeat']} rounds, ratios medians of per-round ratios; host keys "
                  f"checked by {', '.join(run['host_keys_checked'])}, not by the others)."
                  + missing) + "\n\n"
            + table(["H", *libs, *ratios], rows, first_left=False) + "\n\n"
            + table(["client CPU per host (ms), start-up excluded",
                     *(f"H={h}" for h in hosts[1:]), "import (s)",
                     f"peak RSS MiB (H={hosts[-1]})"], cpu_rows))


def syscalls_per_login() -> str:
    run = load("cpu_per_host")
    calls = run["syscalls_per_login"]
    rows = [[lib, bold(number(v["total"], 1)) if lib == "ours" else number(v["total"], 1),
             ", ".join(f"{name} {number(count, 1)}" for name, count in v["top"])]
            for lib, v in calls["by_library"].items()]
    return (prose(f"System calls per login and command (`strace -f -c`, H = {calls['hosts']} "
                  "less H = 1, over H - 1; the same run):") + "\n\n"
            + table(["library", "calls per login", "most frequent, per login"], rows,
                    numbers_right=False))


def cpu_by_part() -> str:
    run = load("cpu_per_host")
    parts = run.get("cpu_ms_per_host_by_part")
    if not parts or not parts["by_library"]:
        return prose("Not measured in the stored run (`--perf-hosts 0`, or perf unavailable).")
    h = str(parts["hosts"])
    names = [*cpu_parts.PARTS, "total"]
    rows = []
    for lib, figures in parts["by_library"].items():
        # Grouped from each run's samples by shared object, as cpu_parts groups them now.
        samples = figures["samples"]
        per = cpu_parts.per_host_ms(samples[h], samples["1"], int(h),
                                    parts["samples_per_cpu_second"])
        rusage = run["cpu_ms_per_host"].get(lib, {}).get(h)
        rows.append([lib, *(_ms(per[name]) for name in names), _ms(rusage)])
    return (prose(f"Client CPU per host (ms) by where it goes: `perf record -e cpu-clock -F "
                  f"{parts['samples_per_cpu_second']}` over the whole process, H = {h} less "
                  f"H = 1, over H - 1, once per library in the same run (`total` is perf's; "
                  f"the last column the same run's median from the process's own CPU time, "
                  f"for comparison):") + "\n\n"
            + table(["library", *names, f"CPU per host at H = {h} (rounds' median)"], rows))


def login_floor_figures() -> str:
    run = load("cpu_per_host")
    floor = run["floor"]
    speed = floor.get("openssl_speed_us") or {}
    rows = [[name, number(micros, 1),
             number(speed.get(name.replace("keygen + ", "")), 1)]
            for name, micros in floor["crypto_us"].items()]
    client, server = floor["per_login_us"]["client"], floor["per_login_us"]["server"]
    c = run["cpu_ms_per_host"].get("floor-c", {})
    top = str(max(run["hosts"]))
    return (table(["operation (µs of CPU each)", "cryptography", "openssl speed"], rows)
            + "\n\n" + prose(
                "(`openssl speed` times the X25519 shared secret alone, without the key "
                "generation.) "
                "One login's public-key operations (X25519 key generation and shared secret, "
                "the host key signature verified, the user's Ed25519 signature made) cost the "
                "client " + " or ".join(f"{number(v)} µs with an {k}" for k, v in client.items())
                + " (the server: " + " or ".join(f"{number(v)} µs" for v in server.values())
                + "). libssh2 driven from C (`floor-c`, the same run) spends "
                + " / ".join(_ms(c.get(h)) for h in map(str, run["hosts"][1:]))
                + " ms of client CPU per host at H = "
                + " / ".join(map(str, run["hosts"][1:]))
                + f": {_times(_ratio(c.get(top), _first(client)), 1)} the public-key floor."))


def _first(values: Dict[str, float]) -> float:
    return next(iter(values.values())) / 1000


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def cpu_per_host_targets() -> str:
    run = load("cpu_per_host")
    ours = [lib for lib in ("ours", "ours-native", "ours-aio") if lib in run["libraries"]]
    cpu = run["cpu_ms_per_host"]

    def met(ok: bool) -> str:
        return "met" if ok else "not met"

    def cpu_at(lib: str, h: str) -> str:
        return f"{lib} {_ms(cpu[lib].get(h))} ms"

    lines = []
    at_200 = [cpu[lib].get("200") for lib in ours]
    if all(v is not None for v in at_200):
        lines.append(
            f"- Client CPU per host ≤ {CPU_PER_HOST_TARGET_MS} ms at H = 200: "
            f"{met(min(at_200) <= CPU_PER_HOST_TARGET_MS)} "
            f"({', '.join(cpu_at(lib, '200') for lib in ours)}; hussh "
            f"{_ms(cpu.get('hussh', {}).get('200'))} ms, the C floor "
            f"{_ms(cpu.get('floor-c', {}).get('200'))} ms).")
    for peer, limit in WALL_TARGETS.items():
        cells = []
        for lib in ours:
            values = run["wall_ratio"].get(f"{lib} / {peer}", {})
            cells.append(f"{lib} " + " / ".join(_times(values.get(h)) for h in ("100", "200")))
        ok = all(v is not None and v <= limit for lib in ours[:1]
                 for v in (run["wall_ratio"][f"{lib} / {peer}"].get(h) for h in ("100", "200")))
        lines.append(f"- Wall ≤ {limit}× {peer} at H = 100 and 200: {met(ok)} for ours "
                     f"({'; '.join(cells)}).")
    calls = run["syscalls_per_login"]["by_library"]
    if "ours" in calls:
        lines.append(f"- ≤ {SYSCALLS_TARGET} system calls per login and command: "
                     f"{met(calls['ours']['total'] <= SYSCALLS_TARGET)} (ours "
                     f"{number(calls['ours']['total'], 1)}; the C floor "
                     f"{number(calls.get('floor-c', {}).get('total'), 1)}).")
    imported = run["import_wall_s"].get("ours")
    import_cpu = run.get("import_cpu_s", {}).get("ours")
    lines.append(f"- `import pssh.clients` ≤ {IMPORT_TARGET_S} s: "
                 f"{met(imported is not None and imported <= IMPORT_TARGET_S)} "
                 f"({number(imported, 3)} s wall in the fan-out workers, median"
                 + (f"; {number(import_cpu, 3)} s of CPU" if import_cpu is not None else "")
                 + ").")
    lines.append("- Ramp p90 ≤ 1.1× median at N = 50: not measured by this harness (see the "
                 "ramp above).")
    return "\n".join(prose(line, indent="  ") for line in lines)


# --- issue 29: the per-operation suites (pytest-benchmark) ---------------------------------

def _ops_table(*names: str) -> str:
    groups: Dict[str, Dict[str, float]] = {}
    libs: List[str] = []
    runs = []
    for name in names:
        run = load(name)
        runs.append(run)
        for bench in run["benchmarks"]:
            stats = bench["stats"]
            groups.setdefault(bench["group"], {})[bench["param"]] = (stats["median"],
                                                                      stats["min"])
            if bench["param"] not in libs:
                libs.append(bench["param"])
    rows = []
    for group, figures in groups.items():
        best = min(median for median, _ in figures.values())
        cells = []
        for lib in libs:
            if lib not in figures:
                cells.append("n/a")
                continue
            median, least = figures[lib]
            cell = f"{number(median * 1000, 2)} ms ({number(least * 1000, 2)})"
            cells.append(bold(cell) if median == best and len(figures) > 1 else cell)
        rows.append([group, *cells])
    dates = sorted({run["datetime"][:10] for run in runs})
    rounds = sorted({b["stats"]["rounds"] for run in runs for b in run["benchmarks"]})
    return (prose(f"Median per operation and, in brackets, the fastest round "
                  f"({_span(rounds, 0)} rounds each; run of {', '.join(dates)}; the fastest "
                  "median in bold):") + "\n\n"
            + table(["operation", *libs], rows))


def ops_sync() -> str:
    return _ops_table("ops_sync", "ops_sync_ssh2python")


def ops_async() -> str:
    return _ops_table("ops_async")


#: Block name -> the function that writes its text.
BLOCKS: Dict[str, Callable[[], str]] = {
    "readme-performance": readme_performance,
    "readme-patch-effects": readme_patch_effects,
    "unpatched-cost": unpatched_cost,
    "patch-0001-measured": patch_0001_measured,
    "patch-0005-measured": patch_0005_measured,
    "patch-0009-measured": patch_0009_measured,
    "ramp-operations": ramp_operations,
    "ramp-channel-open": ramp_channel_open,
    "ramp-close": ramp_close,
    "ramp-against-the-post": ramp_against_the_post,
    "post-auth-stall": post_auth_stall,
    "aio-fanout": aio_fanout,
    "aio-rtt50": aio_rtt50,
    "aio-sftp": aio_sftp,
    "asyncio-speed": asyncio_speed,
    "scaling-table": scaling_table,
    "scaling-intro": scaling_intro,
    "sftp-results": sftp_results,
    "fanout-rtt50": fanout_rtt50,
    "fanout-rtt50-reading": fanout_rtt50_reading,
    "cpu-per-host": cpu_per_host_tables,
    "syscalls-per-login": syscalls_per_login,
    "cpu-by-part": cpu_by_part,
    "login-floor": login_floor_figures,
    "cpu-per-host-targets": cpu_per_host_targets,
    "ops-sync": ops_sync,
    "ops-async": ops_async,
}


def pages(root: Path) -> List[Path]:
    found: Dict[Path, None] = {}
    for pattern in PAGE_GLOBS:
        for path in sorted(root.glob(pattern)):
            found.setdefault(path, None)
    return list(found)


def render(text: str, where: str = "page") -> str:
    """``text`` with every marked block's body regenerated."""
    def body(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise ValueError(f"{where}: unknown figures block {name!r} (known: "
                           f"{', '.join(BLOCKS)})")
        indent = match["indent"]
        text = "\n".join(indent + line if line else line
                         for line in BLOCKS[name]().split("\n"))
        # A blank line on each side keeps a generated table a table in Markdown.
        return f"{indent}{match['open']}\n{text}\n\n{indent}{match['close']}"
    return BLOCK.sub(body, text)


def blocks_in(text: str) -> List[str]:
    return [m["name"] for m in BLOCK.finditer(text)]


def stale(root: Path) -> List[str]:
    """The pages (relative to ``root``) whose blocks differ from what the results give."""
    return [str(page.relative_to(root)) for page in pages(root)
            if render(page.read_text(), str(page.relative_to(root))) != page.read_text()]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.figures",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the repository checkout (default: the current directory)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 and name the pages that are not current")
    args = parser.parse_args(argv)
    if not (args.root / "README.md").exists():
        parser.error(f"{args.root} is not the repository checkout (no README.md): use --root")
    try:
        return check(args.root) if args.check else rewrite(args.root)
    except ValueError as err:
        print(f"python -m benchmarks.figures: {err}", file=sys.stderr)
        return 2


def check(root: Path) -> int:
    pending = stale(root)
    for page in pending:
        print(f"{page}: figures differ from benchmarks/results "
              "(run python -m benchmarks.figures)", file=sys.stderr)
    return 1 if pending else 0


def rewrite(root: Path) -> int:
    for page in pages(root):
        text = page.read_text()
        new = render(text, str(page.relative_to(root)))
        if new != text:
            page.write_text(new)
            print(f"rewrote {page.relative_to(root)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
