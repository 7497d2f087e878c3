"""Single-stream SFTP download throughput: this library vs its peers, one run.

    python -m benchmarks.sftp_throughput [--size-mb 100] [--repeat 5] [--libs ...]

Starts one local OpenSSH server (pssh.sshd), writes a file of random bytes,
then downloads it with each library and cipher in a fresh process, in
round-robin order so that machine noise spreads evenly. Reports the median
MB/s per library and cipher and the ratio to asyncssh and to ``ssh cat``.
Peers come from virtualenvs made by ``benchmarks/peers.sh``
(``.venv-bench`` for paramiko and asyncssh, ``.venv-ssh2python`` for
ssh2-python, whose module name clashes with ours).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.peers import environment, other_builds, split_build, with_other_builds
from pssh.sshd import OpenSSHServer

# Where peers.sh made the peer virtualenvs: $BENCH_VENV_DIR, else the source tree.
ROOT = Path(os.environ.get("BENCH_VENV_DIR") or Path(__file__).resolve().parent.parent)
WORKER = Path(__file__).resolve().parent / "_sftp_worker.py"
# "default": each library's own choice (the only one hussh offers).
CIPHERS = {"aes-gcm": "aes128-gcm@openssh.com", "chacha20": "chacha20-poly1305@openssh.com",
           "default": "default"}


#: Our libraries, which --other-build runs again under another build.
OURS = ("ours", "ours-iter", "ours-aio", "ours-client")
BUILDS: dict = {}


def interpreter(library: str) -> str:
    library, build = split_build(library)
    if build:
        return BUILDS[build]
    venv = {"ssh2-python": ".venv-ssh2python", "paramiko": ".venv-bench",
            "asyncssh": ".venv-bench", "hussh": ".venv-bench",
            "hussh-aio": ".venv-bench"}.get(library)
    if venv is None:
        return sys.executable
    path = ROOT / venv / "bin" / "python"
    if not path.exists():
        raise SystemExit(f"{library}: {path} missing; run bash benchmarks/peers.sh first")
    return str(path)


def run_once(library, cipher, server, path, threads=1):
    env = environment(split_build(library)[0], interpreter(library))
    out = subprocess.run([interpreter(library), str(WORKER), split_build(library)[0], cipher,
                          server.address,
                          str(server.port), server.user, server.keys.private("ed25519"),
                          str(path), str(threads)],
                         capture_output=True, text=True, env=env, cwd="/")
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"{library} {cipher}: failed: {last}", file=sys.stderr)
        return None
    result = json.loads(out.stdout)
    if "skipped" in result:
        return None
    if threads == 0:
        return result["python_share"]
    return result["bytes"] / result["seconds"] / 1e6, result["cpu"] / (result["bytes"] / 1e8)


def per_round_ratio(results, mine, peer):
    """Median over rounds of mine/peer, each round's pair measured back to back
    (steadier on a shared machine than a ratio of medians); None if unmeasured."""
    pairs = [a / b for a, b in zip(results.get(mine, []), results.get(peer, [])) if a and b]
    return statistics.median(pairs) if pairs else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--libs", nargs="+",
                        default=["ours", "ours-iter", "ours-aio", "asyncssh", "ssh2-python",
                                 "paramiko",
                                 "hussh", "hussh-aio", "openssh", "openssh-sftp"])
    parser.add_argument("--ciphers", nargs="+", default=list(CIPHERS))
    parser.add_argument("--threads", type=int, default=0,
                        help="also measure ours with N threads each downloading (aggregate)")
    parser.add_argument("--gil", action="store_true",
                        help="also measure how fast a pure-Python thread runs during a download")
    parser.add_argument("--other-build", action="append", metavar="LABEL=PYTHON",
                        help="also run ours under this interpreter (another build of this "
                             "project) as LIB@LABEL, with ratios: before/after figures")
    args = parser.parse_args(argv)
    BUILDS.update(other_builds(args.other_build))
    args.libs = with_other_builds(args.libs, BUILDS, OURS)

    with tempfile.TemporaryDirectory() as tmp, OpenSSHServer() as server:
        path = Path(tmp) / "payload"
        with open(path, "wb") as fh:
            for _ in range(args.size_mb):
                fh.write(os.urandom(1 << 20))
        results: dict = {}
        cpu: dict = {}
        for round_ in range(args.repeat):
            # Rotate the order each round: no library always follows the same one.
            order = args.libs[round_ % len(args.libs):] + args.libs[:round_ % len(args.libs)]
            for cipher in args.ciphers:
                for lib in order:
                    measured = run_once(lib, CIPHERS[cipher], server, path)
                    # None keeps the rounds aligned for the per-round ratios.
                    mbps, cpu_s = measured if measured is not None else (None, None)
                    results.setdefault((lib, cipher), []).append(mbps)
                    cpu.setdefault((lib, cipher), []).append(cpu_s)
                    if measured is not None:
                        print(f"round {round_ + 1} {lib:<12} {cipher:<9} {mbps:8.1f} MB/s "
                              f"{cpu_s * 1000:6.0f} ms CPU/100MB", file=sys.stderr)
        scaling = {}
        if args.threads:
            for _ in range(args.repeat):
                one = run_once("ours", CIPHERS["aes-gcm"], server, path, 1)[0]
                many = run_once("ours", CIPHERS["aes-gcm"], server, path, args.threads)[0]
                scaling.setdefault("ratio", []).append(many / one)
                scaling.setdefault("one", []).append(one)
                scaling.setdefault("many", []).append(many)

        gil = {}
        if args.gil:
            for _ in range(args.repeat):
                for lib in [name for name in args.libs if name != "openssh"]:
                    share = run_once(lib, CIPHERS["aes-gcm"], server, path, 0)
                    if share is not None:
                        gil.setdefault(lib, []).append(share)

    print(f"\n{args.size_mb} MB SFTP download, median of {args.repeat} (MB/s)\n")
    print("| library | " + " | ".join(args.ciphers) + " |")
    print("|---|" + "---:|" * len(args.ciphers))
    med = {k: statistics.median(x for x in v if x) for k, v in results.items() if any(v)}
    for lib in args.libs:
        print(f"| {lib} | " + " | ".join(f"{med[(lib, c)]:.0f}" if (lib, c) in med else "n/a"
                                         for c in args.ciphers) + " |")
    cmed = {k: statistics.median(x for x in v if x) for k, v in cpu.items() if any(v)}
    print("\nClient CPU per 100 MB (ms, median, process start-up and login included)\n")
    print("| library | " + " | ".join(args.ciphers) + " |")
    print("|---|" + "---:|" * len(args.ciphers))
    for lib in args.libs:
        print(f"| {lib} | " + " | ".join(f"{cmed[(lib, c)] * 1000:.0f}" if (lib, c) in cmed
                                         else "n/a" for c in args.ciphers) + " |")
    print("\nOurs against each peer: median of the per-round throughput ratios\n")
    print("| ours / peer | " + " | ".join(args.ciphers) + " |")
    print("|---|" + "---:|" * len(args.ciphers))
    for mine in [lib for lib in OURS if lib in args.libs]:
        # The asyncio front end is also compared with the bindings' own bulk path, and
        # each of ours with itself under another build.
        own = ["ours"] if mine == "ours-aio" and "ours" in args.libs else []
        own += [lib for lib in args.libs if split_build(lib)[0] == mine and lib != mine]
        for peer in own + [lib for lib in args.libs if not lib.startswith("ours")]:
            cells = [per_round_ratio(results, (mine, c), (peer, c)) for c in args.ciphers]
            if any(cells):
                print(f"| {mine} / {peer} | " + " | ".join(
                    f"{r:.2f}x" if r else "n/a" for r in cells) + " |")
    if gil:
        print("\nPure-Python thread speed during a download, relative to idle (aes-gcm, median): "
              + ", ".join(f"{lib} {statistics.median(v):.2f}" for lib, v in gil.items()))
    if scaling:
        print(f"\n{args.threads} threads each downloading vs 1 thread (ours, aes-gcm, aggregate): "
              f"{statistics.median(scaling['many']):.0f} vs {statistics.median(scaling['one']):.0f}"
              f" MB/s = {statistics.median(scaling['ratio']):.2f}x (median of per-round ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
