"""The physical floor of one login on this machine: its public-key operations, timed, and
libssh2 driven from C.

    python -m benchmarks.login_floor [--hosts 1 10 100 200] [--repeat 3] [--no-openssl]
                                     [--no-c] [--json FILE]

(a) **Public-key operations.** A client's login does one X25519 key generation and one shared
secret (the key exchange), one host key signature verification (Ed25519 or ECDSA P-256: the
host key type negotiated) and one Ed25519 signature (public key authentication); the server
does the mirror image. Each is timed in a tight loop with the ``cryptography`` package (a core
dependency; its own OpenSSL, the one paramiko and asyncssh use), median of several batches of
process CPU time; and read from ``openssl speed`` (the system's libcrypto, the one libssh2
uses). Their sum is the CPU no client can spend less than per login.

(b) **libssh2 from C.** ``benchmarks/login_floor.c`` (what it measures: its header comment)
is compiled here against the libssh2 shared object that the installed ``ssh2`` package loads
(read from ``ldd`` of its extension modules) and the matching header (that library's install
prefix, this checkout's build tree, then ``pkg-config``); for each H it runs one command on H
loopback hosts at once, host keys checked against a known_hosts file, each run a fresh
process. Client CPU per host start-up excluded is ``(cpu(H) - cpu(1)) / (H - 1)`` (paired per
round, median over rounds); system calls per login come from ``strace -f -c`` at the largest H
less a one-host run.

``benchmarks.cpu_per_host`` runs the same C program beside the Python libraries ("floor-c").
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

SOURCE = Path(__file__).resolve().parent / "login_floor.c"
#: The host key algorithms the C floor offers: the type our client negotiates when its
#: known_hosts file lists the servers' keys in ssh-keygen's order (ed25519 first); libssh2's
#: own default would take ECDSA, which costs less to verify here.
HOSTKEY_ALGORITHMS = "ssh-ed25519,ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256"
CHECKOUT = Path(__file__).resolve().parent.parent

# --- (a) the public-key operations ----------------------------------------------------------

#: Operation -> microseconds, filled by :func:`crypto_floor`.
CLIENT_LOGIN = {
    "ed25519 host key": ("x25519 keygen + shared secret", "ed25519 verify", "ed25519 sign"),
    "ecdsa-p256 host key": ("x25519 keygen + shared secret", "ecdsa-p256 verify",
                            "ed25519 sign"),
}
SERVER_LOGIN = {
    "ed25519 host key": ("x25519 keygen + shared secret", "ed25519 sign", "ed25519 verify"),
    "ecdsa-p256 host key": ("x25519 keygen + shared secret", "ecdsa-p256 sign",
                            "ed25519 verify"),
}


def _operations() -> Dict[str, Callable[[], object]]:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, x25519

    # An exchange hash's size: what the host key signs and the client verifies.
    message = os.urandom(32)
    peer = x25519.X25519PrivateKey.generate().public_key()
    ed = ed25519.Ed25519PrivateKey.generate()
    ed_signature, ed_public = ed.sign(message), ed.public_key()
    ecdsa = ec.ECDSA(hashes.SHA256())
    p256 = ec.generate_private_key(ec.SECP256R1())
    p256_signature, p256_public = p256.sign(message, ecdsa), p256.public_key()
    return {
        "x25519 keygen + shared secret":
            lambda: x25519.X25519PrivateKey.generate().exchange(peer),
        "ed25519 verify": lambda: ed_public.verify(ed_signature, message),
        "ed25519 sign": lambda: ed.sign(message),
        "ecdsa-p256 verify": lambda: p256_public.verify(p256_signature, message, ecdsa),
        "ecdsa-p256 sign": lambda: p256.sign(message, ecdsa),
    }


def crypto_floor(batches: int = 7, per_batch: int = 300) -> Dict[str, float]:
    """Microseconds of process CPU per operation, median of ``batches`` batches."""
    result = {}
    for name, operation in _operations().items():
        operation()   # warm
        samples = []
        for _ in range(batches):
            start = time.process_time()
            for _ in range(per_batch):
                operation()
            samples.append((time.process_time() - start) / per_batch * 1e6)
        result[name] = statistics.median(samples)
    return result


def openssl_speed(seconds: int = 1) -> Optional[Dict[str, float]]:
    """The same operations in microseconds from ``openssl speed`` (the system libcrypto),
    None without the openssl program."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    out = subprocess.run([openssl, "speed", "-seconds", str(seconds), "-mr", "ed25519",
                          "ecdsap256", "ecdhx25519"], capture_output=True, text=True,
                         timeout=120).stdout
    per_second: Dict[str, float] = {}
    for line in out.splitlines():
        fields = line.split(":")
        if fields[0] == "+F6" and fields[3] == "Ed25519":     # sign/s, verify/s
            per_second["ed25519 sign"], per_second["ed25519 verify"] = map(float, fields[4:6])
        elif fields[0] == "+F4" and fields[2] == "256":       # sign/s, verify/s
            per_second["ecdsa-p256 sign"], per_second["ecdsa-p256 verify"] = \
                map(float, fields[3:5])
        elif fields[0] == "+F5" and fields[2] == "253":       # X25519 derivations/s
            per_second["x25519 shared secret"] = float(fields[3])
    return {name: 1e6 / rate for name, rate in per_second.items() if rate > 0}


def login_sums(micros: Dict[str, float]) -> Dict[str, Dict[str, float]]:
    """Microseconds per login, client and server side, for each host key type."""
    def total(operations: Sequence[str]) -> Optional[float]:
        values = [micros.get(op) for op in operations]
        return None if None in values else sum(values)  # type: ignore[arg-type]
    return {side: {hostkey: total(ops) for hostkey, ops in table.items()}
            for side, table in (("client", CLIENT_LOGIN), ("server", SERVER_LOGIN))}


# --- (b) libssh2 from C -----------------------------------------------------------------------

class FloorUnavailable(RuntimeError):
    """The C floor cannot be built here (no compiler, no header, no ssh2 package)."""


def loaded_libssh2(python: str = sys.executable) -> Path:
    """The libssh2 shared object that ``python``'s ``ssh2`` package loads."""
    if python == sys.executable:
        spec = importlib.util.find_spec("ssh2.session")
        origin = spec.origin if spec else None
    else:
        origin = subprocess.run([python, "-c", "import ssh2.session; print(ssh2.session.__file__)"],
                                capture_output=True, text=True, cwd="/").stdout.strip()
    if not origin:
        raise FloorUnavailable("no ssh2 package to take libssh2 from")
    out = subprocess.run(["ldd", origin], capture_output=True, text=True).stdout
    match = re.search(r"libssh2\.so[.\d]*\s*=>\s*(\S+)", out)
    if match and match[1] != "not" and Path(match[1]).exists():
        return Path(match[1]).resolve()
    beside = sorted(Path(origin).parent.glob("libssh2.so*"))
    if beside:
        return beside[0].resolve()
    raise FloorUnavailable(f"cannot tell which libssh2 {origin} loads:\n{out}")


def libssh2_include(library: Path) -> Path:
    """The folder of the ``libssh2.h`` that goes with ``library``: the build's own prefix
    (``LIBSSH2_PREFIX``, or the bundled build in ``LIBSSH2_BUILD_DIR`` or this checkout's
    build/), the library's install prefix, then pkg-config's and the system's. An installed
    package's bundled ``libssh2.so.1`` has no header beside it: the checkout it was built
    from has it, which these variables name."""
    candidates = [Path(os.environ[name]) / sub for name, sub in
                  (("LIBSSH2_PREFIX", "include"), ("LIBSSH2_BUILD_DIR", "install/include"))
                  if os.environ.get(name)]
    candidates += [library.parent.parent / "include",
                   CHECKOUT / "build" / "libssh2" / "install" / "include"]
    pkg = subprocess.run(["pkg-config", "--cflags-only-I", "libssh2"], capture_output=True,
                         text=True) if shutil.which("pkg-config") else None
    if pkg and pkg.returncode == 0:
        candidates += [Path(flag[2:]) for flag in pkg.stdout.split() if flag.startswith("-I")]
    candidates.append(Path("/usr/include"))
    for folder in candidates:
        if (folder / "libssh2.h").exists():
            return folder
    raise FloorUnavailable("libssh2.h not found (looked in "
                           + ", ".join(str(c) for c in candidates) + ")")


def build_floor(directory: Path, python: str = sys.executable) -> Path:
    """``login_floor.c`` compiled into ``directory``, linked to the libssh2 that ``ssh2``
    loads; checked with ldd that the program loads that very file."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise FloorUnavailable("no C compiler (cc)")
    library = loaded_libssh2(python)
    program = directory / "login_floor"
    build = subprocess.run([compiler, "-O2", "-Wall", "-o", str(program), str(SOURCE),
                            f"-I{libssh2_include(library)}", str(library),
                            f"-Wl,-rpath,{library.parent}"], capture_output=True, text=True)
    if build.returncode != 0:
        raise FloorUnavailable(f"compiling {SOURCE.name} failed:\n{build.stderr}")
    linked = subprocess.run(["ldd", str(program)], capture_output=True, text=True).stdout
    match = re.search(r"libssh2\.so[.\d]*\s*=>\s*(\S+)", linked)
    if not match or Path(match[1]).resolve() != library:
        raise FloorUnavailable(f"{program} does not load {library}:\n{linked}")
    return program


def floor_command(program: Path, hosts: Sequence[str], port: int, user: str, key: str,
                  command: str, known_hosts: Optional[str] = None) -> List[str]:
    """The C floor's command line for one fan-out to ``hosts`` (addresses may repeat)."""
    addresses = list(dict.fromkeys(hosts))
    return [str(program), "-n", str(len(hosts)), "-p", str(port), "-u", user, "-k", key,
            "-c", command, "-a", HOSTKEY_ALGORITHMS,
            *(["-K", known_hosts] if known_hosts else []), *addresses]


def run_floor(program: Path, hosts: Sequence[str], group, command: str = "echo hello",
              known_hosts: Optional[str] = None, prefix: Sequence[str] = ()) -> Optional[dict]:
    """One fan-out by the C floor: its JSON ({hosts, ok, cpu, wall, maxrss_kib}), or None."""
    argv = floor_command(program, hosts, group.port, group.servers[0].user,
                         group.keys.private(), command, known_hosts)
    out = subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        print(f"floor-c H={len(hosts)} failed: "
              f"{(out.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the command ------------------------------------------------------------------------------

def main(argv=None) -> int:
    from benchmarks import syscalls
    from benchmarks.fanout import MAX_ADDRESSES
    from pssh.sshd import ServerGroup

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 10, 100, 200])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--command", default="echo hello")
    parser.add_argument("--no-openssl", action="store_true", help="skip `openssl speed`")
    parser.add_argument("--no-c", action="store_true", help="only the public-key operations")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    result: dict = {"crypto_us": crypto_floor()}
    if not args.no_openssl:
        result["openssl_speed_us"] = openssl_speed()
    print("Public-key operations, microseconds of CPU each (median of 7 batches):\n")
    print("| operation | cryptography | openssl speed |\n|---|---:|---:|")
    speed = result.get("openssl_speed_us") or {}
    for name, micros in result["crypto_us"].items():
        other = speed.get(name.replace("keygen + ", ""))
        print(f"| {name} | {micros:.1f} | {f'{other:.1f}' if other else 'n/a'} |")
    for side, sums in login_sums(result["crypto_us"]).items():
        print(f"\nper login, {side} side (cryptography): "
              + ", ".join(f"{hostkey} {total:.0f} µs" for hostkey, total in sums.items()))
    if args.no_c:
        return _write(args.json, result)
    if 1 not in args.hosts:
        args.hosts.insert(0, 1)
    with tempfile.TemporaryDirectory() as tmp, \
            ServerGroup(min(max(args.hosts), MAX_ADDRESSES), first_address=2,
                        config=["LoginGraceTime 120"]) as group:
        program = build_floor(Path(tmp))
        known = group.known_hosts_file()
        runs: Dict[int, List[Optional[dict]]] = {h: [] for h in args.hosts}
        for round_ in range(args.repeat):
            for count in args.hosts:
                hosts = [group.hosts[i % len(group.hosts)] for i in range(count)]
                r = run_floor(program, hosts, group, args.command, known)
                runs[count].append(r)
                if r:
                    print(f"round {round_ + 1} H={count:<4} floor-c {r['wall']:7.3f} s "
                          f"{r['cpu'] / count * 1000:6.2f} ms CPU/host", file=sys.stderr)
        top = max(args.hosts)
        traced = {}
        for count in sorted({1, min(100, top)}):
            hosts = [group.hosts[i % len(group.hosts)] for i in range(count)]
            trace = Path(tmp) / f"strace-{count}"
            prefix = syscalls.strace_prefix(trace)
            if prefix and run_floor(program, hosts, group, args.command, known, prefix):
                traced[count] = syscalls.read_counts(trace)
    result["c"] = {"wall_s": {}, "cpu_ms_per_host": {}}
    print("\nlibssh2 from C (benchmarks/login_floor.c), host keys checked:\n")
    print("| H | wall | CPU per host, start-up excluded |\n|---:|---:|---:|")
    for count in args.hosts:
        walls = [r["wall"] for r in runs[count] if r]
        per_host = [(r["cpu"] - one["cpu"]) / (count - 1) * 1000
                    for r, one in zip(runs[count], runs[1]) if r and one and count > 1]
        wall = statistics.median(walls) if walls else None
        cpu = statistics.median(per_host) if per_host else None
        result["c"]["wall_s"][count], result["c"]["cpu_ms_per_host"][count] = wall, cpu
        print(f"| {count} | {f'{wall:.3f} s' if wall else 'n/a'} | "
              f"{f'{cpu:.3f} ms' if cpu else 'n/a'} |")
    if len(traced) == 2 and all(traced.values()):
        many = max(traced)
        total, top_calls = syscalls.summary(syscalls.per_login(traced[many], traced[1], many))
        result["c"]["syscalls_per_login"] = {"hosts": many, "total": total, "top": top_calls}
        print(f"\nsystem calls per login and command (H={many} less H=1): "
              + syscalls.describe(total, top_calls))
    return _write(args.json, result)


def _write(path: Optional[Path], result: dict) -> int:
    if path:
        path.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
