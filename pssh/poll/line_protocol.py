"""InfluxDB line protocol: one point per line, escaped as the protocol asks.

``measurement,tag=v,... field=v,... time_ns``. Used by the poller's sinks
(:mod:`pssh.poll.sinks`) and by the benchmark harness (``benchmarks/sinks.py``).
Pure functions of the standard library: no I/O here.

A poll result is a point of measurement ``ssh_poll`` (tags host, port, check,
bucket, status; fields: its values, ``response_time``, ``late``, ``state`` (the
status as a number for graphs: :data:`STATE_CODES`) and, when the poll did not
succeed, ``error``); the poller's health is a point of ``ssh_poll_health``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Union

from pssh.poll.results import STATUSES

if TYPE_CHECKING:
    from pssh.poll.results import Health, PollResult

#: The measurement of poll results and of the poller's own health.
RESULT_MEASUREMENT = "ssh_poll"
HEALTH_MEASUREMENT = "ssh_poll_health"
#: Fields every result point has; a parsed value of the same name is replaced by them.
RESERVED_FIELDS = ("response_time", "late", "state", "error")
#: ``state`` field of each status: ok 0, failed 1, timeout 2, down 3.
STATE_CODES = {status: code for code, status in enumerate(STATUSES)}

FieldValue = Union[float, int, str, bool]

_MEASUREMENT = str.maketrans({",": "\\,", " ": "\\ "})
_KEY = str.maketrans({",": "\\,", "=": "\\=", " ": "\\ ", "\\": "\\\\", "\n": "\\n"})


def escape_measurement(name: str) -> str:
    return name.translate(_MEASUREMENT)


def escape_key(text: object) -> str:
    """A tag key, tag value or field key, escaped (commas, equals signs, blanks)."""
    return str(text).translate(_KEY)


def field_value(value: FieldValue) -> Optional[str]:
    """A field value as the protocol writes it: numbers as floats (so that one field keeps
    one type whatever a host answers), booleans, quoted strings; None for what the
    protocol cannot hold (NaN, infinities)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond a double's range
            return None
        return repr(number) if math.isfinite(number) else None
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def line(measurement: str, tags: Mapping[str, object], fields: Mapping[str, FieldValue],
         time_ns: int) -> str:
    """One point. Tags are sorted (InfluxDB's preferred order); empty tag values and fields
    the protocol cannot hold are left out; ValueError if no field is left."""
    tag_text = "".join(f",{escape_key(k)}={escape_key(v)}" for k, v in sorted(tags.items())
                       if str(v) != "")
    encoded = [(escape_key(k), field_value(v)) for k, v in fields.items()]
    field_text = ",".join(f"{k}={v}" for k, v in encoded if v is not None)
    if not field_text:
        raise ValueError(f"point of {measurement} with tags {dict(tags)} has no field")
    return f"{escape_measurement(measurement)}{tag_text} {field_text} {int(time_ns)}"


def bucket_name(interval: float) -> str:
    """A bucket's interval as a tag value or field suffix: ``10``, ``0.5``."""
    return f"{interval:g}"


def result_fields(result: "PollResult") -> Dict[str, FieldValue]:
    fields: Dict[str, FieldValue] = {k: v for k, v in result.values.items()
                                     if k not in RESERVED_FIELDS}
    fields["response_time"] = float(result.response_time)
    fields["late"] = result.late
    fields["state"] = STATE_CODES.get(result.status, len(STATE_CODES))
    if result.status != "ok" and result.error:
        fields["error"] = result.error
    return fields


def result_line(result: "PollResult", tags: Optional[Mapping[str, str]] = None) -> str:
    """The ``ssh_poll`` point of one poll (``tags``: more tags, e.g. the poller's name)."""
    point_tags = {**(tags or {}), "host": result.host, "port": result.port,
                  "check": result.check, "bucket": bucket_name(result.bucket),
                  "status": result.status}
    return line(RESULT_MEASUREMENT, point_tags, result_fields(result),
                round(result.time * 1e9))


def health_fields(health: "Health") -> Dict[str, FieldValue]:
    fields: Dict[str, FieldValue] = {
        "polls": health.polls, "polls_per_s": health.polls_per_s, "late": health.late,
        "late_max": health.late_max, "skipped": health.skipped,
        "hosts_down": health.hosts_down,
        "reconnects": health.reconnects, "dropped": health.dropped,
        "buffered": health.buffered, "in_flight": health.in_flight,
        "polls_ok": health.polls_ok, "polls_failed": health.polls_failed,
        "polls_timeout": health.polls_timeout, "polls_down": health.polls_down}
    for interval, hosts in sorted(health.hosts_per_bucket.items()):
        fields[f"bucket_{bucket_name(interval)}"] = hosts
    return fields


def health_line(health: "Health", tags: Optional[Mapping[str, str]] = None) -> str:
    """The ``ssh_poll_health`` point of one health report."""
    return line(HEALTH_MEASUREMENT, dict(tags or {}), health_fields(health),
                round(health.time * 1e9))
