"""Local time-series servers for the harness: InfluxDB 1.x and VictoriaMetrics.

Debian's ``influxdb`` (1.6: HTTP write API, InfluxQL, Graphite input) and
``victoria-metrics`` (accepts the InfluxDB 2.x write API that
``influxdb-client`` speaks) started as plain background processes on loopback
ports with their data in a temporary folder, like :mod:`pssh.sshd` does for
sshd. Used by the tests; handy for a local dashboard too::

    with InfluxDB1() as influx:
        print(influx.url, influx.graphite_address)
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import List, Optional

from benchmarks.sinks import GRAPHITE_TEMPLATES
from pssh.sshd import free_port


class ServerError(RuntimeError):
    pass


class _Process:
    name = "server"
    binary = ""
    package = ""

    def __init__(self, address: str = "127.0.0.1", start_timeout: float = 30.0) -> None:
        path = shutil.which(self.binary)
        if path is None:
            raise ServerError(f"{self.binary} not found: apt-get install {self.package}")
        self.executable = path
        self.address = address
        self.port = free_port(address)
        self.url = f"http://{address}:{self.port}"
        self.workdir = Path(tempfile.mkdtemp(prefix=f"bench-{self.binary}-"))
        self.start_timeout = start_timeout
        self.process: Optional[subprocess.Popen] = None

    def _command(self) -> List[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def start(self):
        log = open(self.workdir / "server.log", "wb")
        self.process = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"{self.name} exited at start-up: {self.log_tail()}")
            try:
                if self._ready():
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise ServerError(f"{self.name} not ready after {self.start_timeout} s: {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = (self.workdir / "server.log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def get(self, path: str, **params) -> bytes:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            return response.read()


class InfluxDB1(_Process):
    """``influxd`` 1.x with its HTTP API and, into database ``graphite_db``,
    its Graphite input using the harness's templates."""

    name, binary, package = "influxd", "influxd", "influxdb"

    def __init__(self, address: str = "127.0.0.1", graphite_db: str = "graphite",
                 auth: bool = False, **kwargs) -> None:
        super().__init__(address, **kwargs)
        #: HTTP authentication on (influxd then lets anyone create the first admin user).
        self.auth = auth
        self.rpc_port = free_port(address)
        self.graphite_port = free_port(address)
        self.graphite_address = f"{address}:{self.graphite_port}"
        self.graphite_db = graphite_db

    def _command(self) -> List[str]:
        d = self.workdir
        templates = ", ".join(json.dumps(t) for t in GRAPHITE_TEMPLATES)
        (d / "influxdb.conf").write_text(f"""\
reporting-enabled = false
bind-address = "{self.address}:{self.rpc_port}"
[meta]
  dir = "{d}/meta"
[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  bind-address = "{self.address}:{self.port}"
  log-enabled = false
  auth-enabled = {"true" if self.auth else "false"}
[[graphite]]
  enabled = true
  bind-address = "{self.graphite_address}"
  database = "{self.graphite_db}"
  protocol = "tcp"
  batch-size = 1000
  batch-timeout = "200ms"
  templates = [{templates}]
""")
        return [self.executable, "-config", str(d / "influxdb.conf")]

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as response:
                return response.status == 204
        except urllib.error.URLError:
            return False

    def query(self, influxql: str, database: str) -> dict:
        """Run InfluxQL; returns the first statement's result (raises on error)."""
        data = json.loads(self.get("/query", db=database, q=influxql, epoch="ns"))
        result = data["results"][0]
        if "error" in result:
            raise ServerError(f"InfluxQL error: {result['error']} in {influxql}")
        return result


class VictoriaMetrics(_Process):
    """``victoria-metrics`` single node: InfluxDB line protocol on ``/write``
    and ``/api/v2/write``; read back with :meth:`export`."""

    name, binary, package = "victoria-metrics", "victoria-metrics", "victoria-metrics"

    def _command(self) -> List[str]:
        return [self.executable, f"-storageDataPath={self.workdir}/data",
                f"-httpListenAddr={self.address}:{self.port}", "-retentionPeriod=100y",
                "-search.disableCache"]

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as response:
                return response.status == 200
        except urllib.error.URLError:
            return False

    def export(self, match: str) -> List[dict]:
        """Every stored series matching ``match`` (a series selector), as
        {"metric": {labels}, "values": [...], "timestamps": [...]}."""
        self.get("/internal/force_flush")
        body = self.get("/api/v1/export", **{"match[]": match})
        return [json.loads(line) for line in body.splitlines() if line.strip()]
