"""Parsers: a device's command output -> ``{name: value}``.

A parser is any ``Callable[[str], Dict[str, Value]]`` that raises ``ValueError`` (saying
what it expected and what it got) when the output is not what it knows; the poller
then reports that poll as ``"failed"``, naming the host. Built in: :func:`number`,
:func:`key_value`, :func:`json_values`, :func:`loadavg`, :func:`df`, :func:`regex`; a
command line names them with :func:`parser_from_spec`.
"""
from __future__ import annotations

import importlib
import json
import re
from typing import Any, Callable, Dict

from pssh.poll.results import Value

Parser = Callable[[str], Dict[str, Value]]

_SHOWN = 80  # characters of bad output quoted in an error


def _quote(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def to_value(text: str) -> Value:
    """``text`` as an int, a float, a bool (true/false, any case), or the stripped string."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return text


def number(output: str, name: str = "value") -> Dict[str, Value]:
    """The output is one number: ``{name: float}``."""
    try:
        return {name: float(output.strip())}
    except ValueError:
        raise ValueError(f"expected one number, got {_quote(output)}") from None


def named_number(name: str) -> Parser:
    """A :func:`number` parser whose value is called ``name``."""
    def parse(output: str) -> Dict[str, Value]:
        return number(output, name)
    parse.__name__ = f"number_{name}"
    return parse


_KV = re.compile(r"^\s*([^=:\s][^=:]*?)\s*[=:]\s*(.*?)\s*$")


def key_value(output: str) -> Dict[str, Value]:
    """``key=value`` or ``key: value`` lines (blank lines skipped); values converted by
    :func:`to_value`."""
    values: Dict[str, Value] = {}
    for line in output.splitlines():
        if not line.strip():
            continue
        match = _KV.match(line)
        if match is None:
            raise ValueError(f"expected key=value or key: value lines, got {_quote(line)}")
        values[match.group(1)] = to_value(match.group(2))
    if not values:
        raise ValueError("expected key=value or key: value lines, got no output")
    return values


def _flatten(prefix: str, item: Any, into: Dict[str, Value]) -> None:
    if isinstance(item, dict):
        for key, value in item.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), value, into)
    elif isinstance(item, list):
        for i, value in enumerate(item):
            _flatten(f"{prefix}.{i}" if prefix else str(i), value, into)
    elif item is not None:  # JSON null: no value to store
        into[prefix or "value"] = item


def json_values(output: str) -> Dict[str, Value]:
    """A JSON object; nested objects and lists flattened with ``.`` (``{"a": {"b": 1}}``
    -> ``{"a.b": 1}``, lists by index); nulls left out. A bare number is ``value``."""
    try:
        data = json.loads(output)
    except ValueError as err:
        raise ValueError(f"expected JSON ({err}), got {_quote(output)}") from None
    if not isinstance(data, (dict, list, int, float, str, bool)):
        raise ValueError(f"expected a JSON object, got {_quote(output)}")
    values: Dict[str, Value] = {}
    _flatten("", data, values)
    return values


def loadavg(output: str) -> Dict[str, Value]:
    """``/proc/loadavg``: ``load1``, ``load5``, ``load15`` (floats), ``running`` and
    ``total`` (scheduling entities, ints)."""
    fields = output.split()
    try:
        running, total = fields[3].split("/")
        return {"load1": float(fields[0]), "load5": float(fields[1]),
                "load15": float(fields[2]), "running": int(running), "total": int(total)}
    except (IndexError, ValueError):
        raise ValueError(f"expected /proc/loadavg's line, got {_quote(output)}") from None


def df(output: str) -> Dict[str, Value]:
    """``df -P`` (POSIX format): per mount point ``<mount>.size_kb``, ``.used_kb``,
    ``.avail_kb`` (in 1024-byte units whatever the block size) and ``.used_pct``."""
    lines = [line for line in output.splitlines() if line.strip()]
    header = lines[0].split() if lines else []
    if len(header) < 6 or not header[1].endswith("-blocks"):
        raise ValueError(f"expected df -P output, got {_quote(output)}")
    try:
        scale = int(header[1].split("-")[0]) / 1024
    except ValueError:
        raise ValueError(f"expected df -P's block size header, got {_quote(lines[0])}") \
            from None
    values: Dict[str, Value] = {}
    for line in lines[1:]:
        fields = line.split(None, 5)
        try:
            size, used, avail = (int(f) * scale for f in fields[1:4])
            pct = float(fields[4].rstrip("%")) if fields[4] != "-" else 0.0
            mount = fields[5]
        except (IndexError, ValueError):
            raise ValueError(f"expected a df -P line, got {_quote(line)}") from None
        values.update({f"{mount}.size_kb": size, f"{mount}.used_kb": used,
                       f"{mount}.avail_kb": avail, f"{mount}.used_pct": pct})
    if not values:
        raise ValueError(f"expected df -P output with file systems, got {_quote(output)}")
    return values


def regex(pattern: str) -> Parser:
    """A parser that searches the output for ``pattern`` (multi-line mode) and returns
    its named groups, converted by :func:`to_value` (groups that did not take part are
    left out)."""
    try:
        compiled = re.compile(pattern, re.MULTILINE)
    except re.error as err:
        raise ValueError(f"bad regular expression {pattern!r}: {err}") from None
    if not compiled.groupindex:
        raise ValueError(f"regular expression {pattern!r} has no named group "
                         "((?P<name>...)): it would give no values")

    def parse(output: str) -> Dict[str, Value]:
        match = compiled.search(output)
        if match is None:
            raise ValueError(f"output does not match {pattern!r}: {_quote(output)}")
        return {name: to_value(text) for name, text in match.groupdict().items()
                if text is not None}
    parse.__name__ = f"regex({pattern!r})"
    return parse


#: Parsers by the names :func:`parser_from_spec` knows.
BUILT_IN: Dict[str, Parser] = {"number": number, "kv": key_value, "json": json_values,
                               "loadavg": loadavg, "df": df}


def parser_from_spec(spec: str) -> Parser:
    """A parser by name: ``number``, ``kv``, ``json``, ``loadavg``, ``df``,
    ``regex:PATTERN``, or ``module:function`` (imported; e.g. ``mypkg.parsers:nginx``)."""
    spec = spec.strip()
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    if spec.startswith("regex:"):
        return regex(spec[len("regex:"):])
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"unknown parser {spec!r}: use one of {', '.join(BUILT_IN)}, "
                         "regex:PATTERN or module:function")
    try:
        parser = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"parser {spec!r} cannot be loaded: {err}") from None
    if not callable(parser):
        raise ValueError(f"parser {spec!r} is not callable")
    return parser


__all__ = ["BUILT_IN", "Parser", "df", "json_values", "key_value", "loadavg", "named_number",
           "number", "parser_from_spec", "regex", "to_value"]
