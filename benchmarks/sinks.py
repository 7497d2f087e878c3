"""Where timings go as they are measured: raw files and time-series databases.

Every timing becomes one point::

    ssh_bench,library=L,operation=OP,concurrency=N,run_id=R,host=H,thread=T seconds=S <time>

and at the end of each step one summary point per library and operation::

    ssh_bench_step,library=L,operation=OP,concurrency=N,run_id=R,host=H
        median=S,p90=S,sessions=K,errors=E,ratio=X      (ratio: median / baseline's)

The ``thread`` tag keeps two sessions that start in the same instant apart
(InfluxDB keeps one point per series and timestamp).

Sinks: InfluxDB 1.x over its HTTP write API, InfluxDB 1.x through its Graphite
input, and InfluxDB 2.x/3.x (or anything that speaks the v2 write API) through
``influxdb-client``. The line protocol and the buffered, batching sender are the
poller's (:mod:`pssh.poll.line_protocol`, :mod:`pssh.poll.sinks`): database sinks
batch in a background thread and never block the caller; a server that is down
costs a count of unsent points, not the run.
"""
from __future__ import annotations

import csv
import json
import logging
import socket
from dataclasses import dataclass, field
from typing import Dict, IO, List, Optional, Sequence

from benchmarks.sessions import OPERATIONS
from pssh.poll.line_protocol import field_value, line
from pssh.poll.sinks import BufferedSink, InfluxDB1Sink

log = logging.getLogger(__name__)

MEASUREMENT = "ssh_bench"
STEP_MEASUREMENT = "ssh_bench_step"

# Graphite has no tags: they travel as path segments, which these templates
# (for influxd's [[graphite]] section) turn back into tags.
GRAPHITE_TEMPLATES = [
    f"{STEP_MEASUREMENT}.* measurement.run_id.host.library.concurrency.operation.field",
    f"{MEASUREMENT}.* measurement.run_id.host.library.concurrency.thread.operation.field",
]
GRAPHITE_TAG_ORDER = {
    MEASUREMENT: ("run_id", "host", "library", "concurrency", "thread", "operation"),
    STEP_MEASUREMENT: ("run_id", "host", "library", "concurrency", "operation"),
}


@dataclass
class Point:
    measurement: str
    tags: Dict[str, str]
    fields: Dict[str, float]
    time_ns: int

    def line_protocol(self) -> str:
        return line(self.measurement, self.tags, self.fields, self.time_ns)

    def graphite_lines(self) -> List[str]:
        segments = [_graphite_segment(self.tags[name])
                    for name in GRAPHITE_TAG_ORDER[self.measurement]]
        prefix = ".".join([self.measurement, *segments])
        stamp = f"{self.time_ns / 1e9:.6f}"
        return [f"{prefix}.{name} {field_value(value)} {stamp}"
                for name, value in self.fields.items()]


def _graphite_segment(value: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in str(value))


def session_points(record: dict) -> List[Point]:
    """The points of one session record (none for a failed session)."""
    tags = {"library": record["library"], "concurrency": str(record["concurrency"]),
            "run_id": record["run_id"], "host": record["host"], "thread": str(record["thread"])}
    time_ns = int(record["time"] * 1e9)
    return [Point(MEASUREMENT, {**tags, "operation": op}, {"seconds": seconds}, time_ns)
            for op, seconds in record.get("ops", {}).items()]


# -- raw files ------------------------------------------------------------------

RAW_COLUMNS = ("run_id", "host", "library", "version", "concurrency", "thread", "time",
               *OPERATIONS, "error")


class RawFile:
    """Every session as it ends: JSON lines (``.jsonl``) or CSV (``.csv``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fh: IO[str] = open(path, "w", newline="")
        self._csv = None
        if path.endswith(".csv"):
            self._csv = csv.DictWriter(self._fh, RAW_COLUMNS, extrasaction="ignore")
            self._csv.writeheader()

    def write(self, record: dict) -> None:
        if self._csv is not None:
            self._csv.writerow({**record, **record.get("ops", {})})
        else:
            self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def read_raw(path: str) -> List[dict]:
    """Session records back from a raw file written by :class:`RawFile`."""
    with open(path, newline="") as fh:
        if not path.endswith(".csv"):
            return [json.loads(line) for line in fh if line.strip()]
        records = []
        for row in csv.DictReader(fh):
            ops = {op: float(row[op]) for op in OPERATIONS if row.get(op)}
            record = {k: row[k] for k in ("run_id", "host", "library", "version", "error")
                      if row.get(k)}
            record.update(concurrency=int(row["concurrency"]), thread=int(row["thread"]),
                          time=float(row["time"]))
            if ops:
                record["ops"] = ops
            records.append(record)
        return records


# -- databases --------------------------------------------------------------------

@dataclass
class SinkReport:
    name: str
    sent: int = 0
    unsent: int = 0
    errors: List[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"{self.name}: {self.sent} points written"
        if self.unsent:
            text += f", {self.unsent} NOT sent ({self.errors[-1] if self.errors else 'unknown'})"
        return text


class BatchingSink(BufferedSink):
    """Points buffered and sent in batches by a background thread
    (:class:`pssh.poll.sinks.BufferedSink`, the poller's): ``write`` never blocks; when
    the buffer is full, or a batch fails (no retries: a benchmark does not wait for its
    database), points are dropped and counted as unsent."""

    name = "sink"

    def __init__(self, batch_size: int = 1000, flush_seconds: float = 1.0,
                 max_queued: int = 200_000, **options) -> None:
        super().__init__(max_buffered=max_queued, batch_size=batch_size,
                         flush_interval=flush_seconds, retry=False, **options)

    def write(self, points: Sequence[Point]) -> None:  # type: ignore[override]
        for point in points:
            super().write(point)

    def _encode(self, point: Point) -> str:
        return point.line_protocol()

    def close(self, timeout: float = 30.0) -> SinkReport:  # type: ignore[override]
        super().close(timeout)
        return SinkReport(self.name, self.sent, self.dropped,
                          [self.last_error] if self.last_error else [])


class InfluxV1Sink(InfluxDB1Sink, BatchingSink):
    """InfluxDB 1.x: line protocol to ``/write?db=...`` (the database is created)."""

    def __init__(self, url: str, database: str, username: Optional[str] = None,
                 password: Optional[str] = None, timeout: float = 5.0, **kwargs) -> None:
        super().__init__(url, database, username=username, password=password,
                         timeout=timeout, **kwargs)


class GraphiteSink(BatchingSink):
    """Graphite plaintext protocol (InfluxDB 1.x's Graphite input, carbon)."""

    def __init__(self, address: str, timeout: float = 5.0, **kwargs) -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"graphite address must be HOST:PORT, got {address!r}")
        self.name = f"Graphite {address}"
        self._address = (host, int(port))
        self._timeout = timeout
        self._sock: Optional[socket.socket] = None
        super().__init__(**kwargs)

    def _send(self, batch: List[Point]) -> None:
        data = "".join(line + "\n" for p in batch for line in p.graphite_lines()).encode()
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self._address, timeout=self._timeout)
            self._sock.sendall(data)
        except OSError as err:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            raise OSError(f"cannot send to {self._address[0]}:{self._address[1]}: "
                          f"{err.strerror or err}") from None

    def _close_destination(self) -> None:
        if self._sock is not None:
            self._sock.close()


class InfluxV2Sink:
    """InfluxDB 2.x/3.x write API through ``influxdb-client``'s batching writer."""

    def __init__(self, url: str, token: str, org: str, bucket: str,
                 batch_size: int = 1000, flush_seconds: float = 1.0) -> None:
        try:
            from influxdb_client import InfluxDBClient, WriteOptions
        except ImportError:
            raise SystemExit("InfluxDB 2.x output needs influxdb-client: "
                             "pip install 'pssh2[bench]'") from None
        self.report = SinkReport(f"InfluxDB 2.x {url} bucket={bucket}")
        self._bucket, self._org = bucket, org
        self._client = InfluxDBClient(url=url, token=token, org=org, timeout=5_000)
        self._api = self._client.write_api(
            write_options=WriteOptions(batch_size=batch_size,
                                       flush_interval=int(flush_seconds * 1000),
                                       max_retries=0),
            success_callback=self._sent, error_callback=self._failed)

    @staticmethod
    def _count(data) -> int:
        if isinstance(data, bytes):
            data = data.decode()
        return len([line for line in str(data).split("\n") if line])

    def _sent(self, _conf, data) -> None:
        self.report.sent += self._count(data)

    def _failed(self, _conf, data, err) -> None:
        self.report.unsent += self._count(data)
        message = str(getattr(err, "message", None) or err).strip().splitlines()[0]
        if not self.report.errors or self.report.errors[-1] != message:
            log.warning("%s: points not sent: %s", self.report.name, message)
            self.report.errors.append(message)

    def write(self, points: Sequence[Point]) -> None:
        self._api.write(self._bucket, self._org, [p.line_protocol() for p in points],
                        write_precision="ns")

    def close(self, timeout: float = 30.0) -> SinkReport:
        self._api.close()    # flushes what is batched
        self._client.close()
        return self.report
