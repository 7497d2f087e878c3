"""Where poll results and health reports go: a stream (line protocol or JSON lines),
InfluxDB 1.x, or anything that speaks the InfluxDB 2.x write API.

Every sink buffers and sends from a thread of its own, so that :meth:`Sink.write`
never waits: the poller calls it from its gevent hub, where one slow HTTP request
or a full pipe would stop every host's polls. The buffer is bounded; past the bound
points are dropped and counted (:attr:`BufferedSink.dropped`), and a warning is
logged once per episode. A server that is down keeps the points buffered (up to
the bound) and is retried with growing, jittered delays; when it answers again the
buffered points go out.

Why a real OS thread, started through the *original* ``_thread`` even when gevent
has monkey-patched the process: the sender's I/O (``urllib``, a blocking
``write()`` to a pipe) must not run on the hub, and nothing the hub does may wait
for the sender. The two sides share no lock: the buffer is a ``deque`` (append and
popleft are atomic), counters are each written by one side only, and the sender
looks at the buffer every :data:`TICK` seconds instead of being woken. gevent's
thread pool would do as well but is shared (DNS lookups use it) and has few
threads; a sink's sender lives as long as the sink.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import logging
import math
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import IO, Any, Callable, Deque, Dict, List, Mapping, Optional, Protocol, Union, \
    runtime_checkable

from pssh.poll.line_protocol import bucket_name, health_line, result_line
from pssh.poll.results import Health, PollResult

log = logging.getLogger("pssh.poll.sinks")

Item = Union[PollResult, Health]

#: Seconds between the sender's looks at its buffer.
TICK = 0.05
#: Default bound of a sink's buffer, in points (results and health reports).
MAX_BUFFERED = 100_000


@runtime_checkable
class Sink(Protocol):
    """What the poller writes to. ``write`` never blocks; ``flush`` and ``close`` wait at
    most ``timeout`` seconds."""

    dropped: int
    buffered: int
    sent: int

    def write(self, item: Item) -> None: ...

    def flush(self, timeout: float) -> None: ...

    def close(self, timeout: float = 10.0) -> None: ...


class SinkUnavailable(OSError):
    """The destination cannot take points now (down, unreachable, overloaded): retried."""


class PointsRejected(ValueError):
    """The destination refused these points for good (bad data, no permission): dropped.

    ``refused``: how many of the batch's points, when the destination wrote the others
    (InfluxDB's "partial write"); None when it refused the whole batch.
    """

    def __init__(self, message: str, refused: Optional[int] = None) -> None:
        super().__init__(message)
        self.refused = refused


#: InfluxDB 1.x and 2.x: "partial write: <why> dropped=N" (N points of a field type
#: conflict; a line it cannot parse is said as "unable to parse" and not in N).
_PARTIAL_WRITE = re.compile(r"partial write:.*\bdropped=(\d+)", re.S)


def _points_refused(answer: str) -> Optional[int]:
    """How many points an answer that says "partial write" counts as refused (the
    others were written), or None when it does not say so."""
    match = _PARTIAL_WRITE.search(answer)
    if match is None:
        return None
    return int(match.group(1)) + answer.count("unable to parse")


def _original(module: str, name: str) -> Any:
    """``module.name`` as it was before gevent's monkey-patching (itself if unpatched)."""
    try:
        from gevent.monkey import get_original
        return get_original(module, name)
    except ImportError:  # pragma: no cover - gevent is a dependency
        return getattr(__import__(module), name)


_start_thread = _original("_thread", "start_new_thread")
_thread_sleep = _original("time", "sleep")


def _wait_sleep(seconds: float) -> None:
    """Sleep in the caller's thread without stopping its other greenlets."""
    import gevent
    gevent.sleep(seconds)


class BufferedSink:
    """A bounded buffer and the thread that sends it in batches; subclasses say how a
    batch is sent (:meth:`_send`).

    ``max_buffered``: the bound (points); ``batch_size``: the most points per send;
    ``flush_interval``: the longest a point waits for its batch to fill;
    ``retry_max``: the longest delay between tries while the destination is down;
    ``tags``: tags added to every point (a site, a shard); ``retry=False``: a batch
    that fails is dropped and counted at once instead of kept for another try (for a
    run that must not wait on its destination, like a benchmark's).
    """

    name = "sink"

    def __init__(self, *, max_buffered: int = MAX_BUFFERED, batch_size: int = 5000,
                 flush_interval: float = 1.0, retry_max: float = 30.0,
                 tags: Optional[Mapping[str, str]] = None, retry: bool = True) -> None:
        if max_buffered < 1 or batch_size < 1:
            raise ValueError(f"{self.name}: max_buffered and batch_size must be at least 1")
        self.max_buffered = max_buffered
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.retry_max = retry_max
        self.retry = retry
        self.tags: Dict[str, str] = dict(tags or {})
        self._buffer: Deque[Any] = collections.deque()
        # Each counter has one writer: the caller's side or the sender's.
        self._accepted = 0          # caller: points put in the buffer
        self._dropped_full = 0      # caller: points dropped, the buffer being full
        self._sent = 0              # sender: points the destination took
        self._done = 0              # sender: points taken out of the buffer (sent or refused)
        self._rejected = 0          # sender: points the destination refused
        self._unencodable = 0       # sender: points of the batch being sent that no line holds
        self._abandoned = 0         # close(): points left in the buffer at the end
        self._dropping = False      # in an episode of dropping
        self._episode_start = 0     # _dropped_full when the episode began
        self._flush_to = 0          # send without waiting until _done reaches this
        self._stopping = False
        self._stopped = False       # the sender has ended
        self._gave_up = False       # close() counted what was left: the sender counts no more
        self._closed = False
        self.last_error: Optional[str] = None
        _start_thread(self._sender, ())

    # -- the caller's side ---------------------------------------------------------

    @property
    def dropped(self) -> int:
        """Points that will never be sent: buffer full, refused by the destination, or
        left unsent at :meth:`close`."""
        return self._dropped_full + self._rejected + self._abandoned

    @property
    def buffered(self) -> int:
        """Points waiting to be sent now."""
        return len(self._buffer)

    @property
    def sent(self) -> int:
        """Points the destination took."""
        return self._sent

    def write(self, item: Any) -> None:
        """Buffer one point; never blocks. Past the bound (or after :meth:`close`) it is
        dropped and counted."""
        if self._closed:
            self._dropped_full += 1
            return
        if len(self._buffer) >= self.max_buffered:
            self._dropped_full += 1
            if not self._dropping:
                self._dropping = True
                self._episode_start = self._dropped_full - 1
                log.warning("%s: buffer full (%d points): dropping points until it drains%s",
                            self.name, self.max_buffered,
                            f" (last error: {self.last_error})" if self.last_error else "")
            return
        if self._dropping and len(self._buffer) < self.max_buffered // 2:
            self._end_episode()
        self._buffer.append(item)
        self._accepted += 1

    def _end_episode(self) -> None:
        self._dropping = False
        log.warning("%s: %d points were dropped while the buffer was full (%d in all)",
                    self.name, self._dropped_full - self._episode_start, self.dropped)

    def flush(self, timeout: float) -> None:
        """Send what is buffered now without waiting for a batch to fill; return when it
        is sent (or refused), or after ``timeout`` seconds."""
        target = self._accepted
        self._flush_to = max(self._flush_to, target)
        deadline = time.monotonic() + timeout
        while self._done < target and not self._stopped and time.monotonic() < deadline:
            _wait_sleep(min(TICK / 2, max(0.0, deadline - time.monotonic())))

    def close(self, timeout: float = 10.0) -> None:
        """Flush (for at most ``timeout`` seconds), stop the sender, and count what is
        left unsent as dropped."""
        if self._closed:
            return
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        self._closed = True
        self._stopping = True
        while not self._stopped and time.monotonic() < deadline:
            _wait_sleep(TICK / 2)
        self._gave_up = True
        left = len(self._buffer)
        if left:
            self._buffer.clear()
            self._abandoned += left
            log.warning("%s: %d points not sent at close%s", self.name, left,
                        f" ({self.last_error})" if self.last_error else "")
        if self._dropping:
            self._end_episode()
        self._close_destination()

    def __enter__(self) -> "BufferedSink":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name}: sent={self.sent} "
                f"buffered={self.buffered} dropped={self.dropped}>")

    # -- the sender's side ---------------------------------------------------------

    def _sender(self) -> None:
        failures = 0
        oldest = None  # monotonic time the buffer stopped being empty
        try:
            while not (self._stopping and (not self._buffer or failures)):
                if not self._buffer:
                    oldest = None
                    _thread_sleep(TICK)
                    continue
                now = time.monotonic()
                oldest = now if oldest is None else oldest
                due = (len(self._buffer) >= self.batch_size or self._stopping
                       or now - oldest >= self.flush_interval or self._done < self._flush_to)
                if not due:
                    _thread_sleep(TICK)
                    continue
                batch = list(itertools.islice(self._buffer, self.batch_size))
                self._unencodable = 0
                try:
                    self._send(batch)
                    if self._gave_up:  # close() counted these as dropped meanwhile
                        return
                except Exception as err:
                    if self._gave_up:
                        return
                    if self.retry and not isinstance(err, PointsRejected):
                        failures += 1  # down: keep the batch, try again later
                        if failures == 1:
                            self._note_error(err, "points are kept and retried", log.warning)
                        self._back_off(failures)
                        continue
                    refused = len(batch)
                    if isinstance(err, PointsRejected) and err.refused is not None:
                        refused = min(len(batch), err.refused + self._unencodable)
                        self._sent += len(batch) - refused  # the destination wrote them
                    self._take(len(batch))
                    self._rejected += refused
                    self._note_error(err, f"{refused} of {len(batch)} points not sent",
                                     log.error)
                else:
                    self._take(len(batch))
                    self._rejected += self._unencodable
                    self._sent += len(batch) - self._unencodable
                    if failures:
                        log.warning("%s: sending again after %d failed tries", self.name,
                                    failures)
                        failures = 0
                oldest = time.monotonic() if self._buffer else None
        except BaseException:  # a bug: say so; the buffer fills and drops are counted
            log.exception("%s: the sender stopped", self.name)
        finally:
            self._stopped = True

    def _take(self, count: int) -> None:
        for _ in range(count):
            try:
                self._buffer.popleft()
            except IndexError:  # close() gave up on them meanwhile
                break
        self._done += count

    def _lines(self, batch: List[Any], encode: Callable[[Any], str]) -> List[str]:
        """Each point of ``batch`` encoded; one that cannot be (a value of a type the format
        has no way to write, from a parser of the user's) is left out and counted as
        refused, so one odd answer never holds up the points behind it."""
        lines = []
        for item in batch:
            try:
                lines.append(encode(item))
            except Exception as err:
                self._unencodable += 1
                self._note_error(err, f"a point of {getattr(item, 'host', 'the poller')} "
                                      f"cannot be written: dropped", log.error)
        return lines

    def _note_error(self, err: BaseException, what: str, level) -> None:
        """Log an error, once while it stays the same."""
        cause = str(err) or type(err).__name__
        if cause != self.last_error:
            level("%s: %s: %s", self.name, cause, what)
        self.last_error = cause

    def _back_off(self, failures: int) -> None:
        """Wait before the next try: doubling from half a second up to ``retry_max``,
        with jitter (many pollers restarted with their server do not come back at
        once); a flush or close asked for meanwhile tries again sooner."""
        delay = min(self.retry_max, 0.5 * 2 ** min(failures - 1, 16))
        delay *= random.uniform(0.8, 1.2)
        end = time.monotonic() + delay
        hurried = self._done < self._flush_to
        while time.monotonic() < end and not self._stopping:
            if not hurried and self._done < self._flush_to:
                break
            _thread_sleep(TICK)

    # -- what subclasses say ---------------------------------------------------------

    def _encode(self, item: Any) -> str:
        """One point as a line of line protocol."""
        return encode_line(item, self.tags)

    def _send(self, batch: List[Any]) -> None:
        """Send ``batch``: :class:`SinkUnavailable` (or any error) to try again later,
        :class:`PointsRejected` to drop it."""
        raise NotImplementedError

    def _close_destination(self) -> None:
        """Release what the sink holds (a file, a connection)."""


class _StreamSink(BufferedSink):
    """Lines written to a text stream (standard output, a file), flushed per batch."""

    def __init__(self, stream: IO[str], **options) -> None:
        self.stream = stream
        self.name = f"{self.kind} to {getattr(stream, 'name', 'a stream')}"
        #: The stream's reader has gone (a closed pipe): nothing written will be read.
        self.reader_gone = False
        super().__init__(**options)

    kind = "lines"

    def _send(self, batch: List[Any]) -> None:
        text = "".join(line + "\n" for line in self._lines(batch, self._line))
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError) as err:  # a closed pipe or file: retrying cannot help
            if isinstance(err, BrokenPipeError):
                self.reader_gone = True
            raise PointsRejected(str(err)) from err

    def _line(self, item: Any) -> str:
        raise NotImplementedError


class LineProtocolSink(_StreamSink):
    """InfluxDB line protocol, one point per line, to ``stream`` (e.g. ``sys.stdout``:
    feed it to ``influx write``, Telegraf's ``execd``, a file)."""

    kind = "line protocol"

    def _line(self, item: Item) -> str:
        return self._encode(item)


class JSONLinesSink(_StreamSink):
    """One JSON object per line to ``stream``: ``{"type": "result", ...}`` per poll,
    ``{"type": "health", ...}`` per health report (:func:`as_json`)."""

    kind = "JSON lines"

    def _line(self, item: Item) -> str:
        return json.dumps(as_json(item, self.tags), separators=(",", ":"))


def encode_line(item: Item, tags: Optional[Mapping[str, str]] = None) -> str:
    """One result or health report as a line of line protocol."""
    if isinstance(item, Health):
        return health_line(item, tags)
    return result_line(item, tags)


def as_json(item: Item, tags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """One result or health report as a JSON-ready dict (bucket intervals as strings)."""
    data = dataclasses.asdict(item)
    if "values" in data:  # JSON has no NaN nor infinities: null instead
        data["values"] = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                          for k, v in data["values"].items()}
    if isinstance(item, Health):
        data["hosts_per_bucket"] = {bucket_name(b): n for b, n in item.hosts_per_bucket.items()}
        data = {"type": "health", **data}
    else:
        data = {"type": "result", **data, "late": item.late}
    if tags:
        data["tags"] = dict(tags)
    return data


class _HTTPSink(BufferedSink):
    """Line protocol POSTed to an HTTP write API."""

    def __init__(self, url: str, timeout: float = 5.0, **options) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        super().__init__(**options)

    def _post(self, path: str, params: Mapping[str, Optional[str]], body: bytes,
              headers: Optional[Mapping[str, str]] = None) -> None:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        request = urllib.request.Request(f"{self.url}{path}?{query}", data=body, method="POST",
                                         headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read()
        except urllib.error.HTTPError as err:
            answer = err.read().decode(errors="replace").strip()
            message = f"HTTP {err.code} from {self.url}{path}: {answer[:300]}"
            if err.code in (408, 429) or err.code >= 500:
                raise SinkUnavailable(message) from None
            raise PointsRejected(message, _points_refused(answer)) from None
        except (urllib.error.URLError, OSError) as err:
            raise SinkUnavailable(f"cannot reach {self.url}: "
                                  f"{getattr(err, 'reason', None) or err}") from None

    def _body(self, batch: List[Item]) -> bytes:
        return "\n".join(self._lines(batch, self._encode)).encode()


class InfluxDB1Sink(_HTTPSink):
    """InfluxDB 1.x: line protocol to ``/write?db=DATABASE`` (the database is created
    first, and again if it disappears)."""

    def __init__(self, url: str, database: str, *, username: Optional[str] = None,
                 password: Optional[str] = None, retention_policy: Optional[str] = None,
                 timeout: float = 5.0, **options) -> None:
        self.name = f"InfluxDB 1.x {url} db={database}"
        self.database = database
        self._auth = {"u": username, "p": password} if username else {}
        self.retention_policy = retention_policy
        self._created = False
        super().__init__(url, timeout, **options)

    def _send(self, batch: List[Item]) -> None:
        if not self._created:
            self._create_database()
        body = self._body(batch)
        if not body:
            return
        try:
            self._post("/write", {**self._auth, "db": self.database, "precision": "ns",
                                  "rp": self.retention_policy}, body)
        except PointsRejected as err:
            if "database not found" in str(err):  # dropped meanwhile: create it again
                self._created = False
                raise SinkUnavailable(str(err)) from None
            raise


    def _create_database(self) -> None:
        """CREATE DATABASE (a no-op when it exists). A user with write rights only is
        refused that: said once, and the writes go ahead (a missing database is then
        what the writes report)."""
        name = self.database.replace("\\", "\\\\").replace('"', '\\"')
        try:
            self._post("/query", {**self._auth, "q": f'CREATE DATABASE "{name}"'}, b"")
        except PointsRejected as err:
            log.warning("%s: cannot create the database (%s): writing to it as it is",
                        self.name, err)
        self._created = True


class InfluxDB2Sink(_HTTPSink):
    """The InfluxDB 2.x write API (``/api/v2/write``, token auth): InfluxDB 2.x and 3.x,
    VictoriaMetrics, Telegraf's ``influxdb_v2_listener``... Plain HTTP: no client
    library needed, and the same buffering and retries as the other sinks."""

    def __init__(self, url: str, token: str, org: str, bucket: str, *,
                 timeout: float = 5.0, **options) -> None:
        self.name = f"InfluxDB 2.x {url} bucket={bucket}"
        self.org, self.bucket = org, bucket
        self._headers = {"Authorization": f"Token {token}",
                         "Content-Type": "text/plain; charset=utf-8"}
        super().__init__(url, timeout, **options)

    def _send(self, batch: List[Item]) -> None:
        body = self._body(batch)
        if body:
            self._post("/api/v2/write", {"org": self.org, "bucket": self.bucket,
                                         "precision": "ns"}, body, self._headers)


__all__ = ["Sink", "BufferedSink", "LineProtocolSink", "JSONLinesSink", "InfluxDB1Sink",
           "InfluxDB2Sink", "SinkUnavailable", "PointsRejected", "encode_line", "as_json",
           "MAX_BUFFERED"]
