"""ClusterShell's node-set grammar (as ``clush -w`` and ``nodeset -e`` read it), for host lists.

A node set is nodes joined by operators, read left to right as ClusterShell reads them:
``,`` (and, here, blanks, as ``-H "a b"`` has always taken) adds, ``!`` takes away,
``&`` keeps only what both sides hold: ``web[1-40]!web[13,27],db1``. A node may hold
bracket groups, each a comma-separated list of numbers and ranges: ``web[1-3,7]``,
zero-padded ``n[01-10]``, stepped ``n[1-9/2]`` (1, 3, 5, 7, 9), several groups
``rack[1-2]-n[1-3]`` (every combination). :func:`fold` is the inverse: names back into
the shortest such form this module writes, which :func:`expand_all` reads back to the
same names.

ClusterShell's ``^`` (either side, not both) is not read: a node ``^FILE`` is a hosts
file here, as in clush's ``-w ^FILE``; nor are its ``@group`` names.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Tuple, Union

#: The most names one expression may stand for (a typo such as ``n[1-10000000]`` is an
#: error, not a run that builds millions of names first).
MAX_NODES = 100_000

_STEPPED_RANGE = re.compile(r"(\d+)-(\d+)(?:/(\d+))?")


class NodeSetError(ValueError):
    """An expression that is not a node set; the message is one sentence for the user."""


#: The operators between nodes: add, take away, keep only the common ones.
OPERATORS = ",!&"


def terms(text: str) -> List[Tuple[str, str]]:
    """The (operator, node) pairs of ``text``, left to right, brackets unexpanded; the
    first operator is ``,``, as is a blank between two nodes:
    ``"web[1-3,7]!web2 db1"`` -> ``[(",", "web[1-3,7]"), ("!", "web2"), (",", "db1")]``."""
    found: List[Tuple[str, str]] = []
    pending: Optional[str] = None  # an operator written since the last node
    word, depth = "", 0
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise NodeSetError(f"brackets inside brackets in {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise NodeSetError(f"unbalanced brackets in {text!r}: ']' without '['")
        if depth == 0 and (char in OPERATORS or char.isspace()):
            if word:
                found.append((pending or ",", word))
                word, pending = "", None
            if char in OPERATORS:
                if pending is not None or not found:
                    raise NodeSetError(f"a node is missing before {char!r} in {text!r}")
                pending = char
        else:
            word += char
    if depth:
        raise NodeSetError(f"unbalanced brackets in {text!r}: '[' without ']'")
    if word:
        found.append((pending or ",", word))
    elif pending is not None:
        raise NodeSetError(f"a node is missing after {pending!r} in {text!r}")
    return found


def expand(node: str) -> List[str]:
    """The names one node stands for: ``rack[1-2]-n[01-02]`` -> rack1-n01, rack1-n02,
    rack2-n01, rack2-n02 (the last group varies fastest, as ClusterShell)."""
    names = [""]
    rest = node
    while rest:
        opening = rest.find("[")
        if opening < 0:
            names = [name + rest for name in names]
            break
        closing = rest.find("]", opening)
        if closing < 0 or "]" in rest[:opening]:
            raise NodeSetError(f"unbalanced brackets in {node!r}")
        if rest[closing + 1:closing + 2] == "[":
            raise NodeSetError(f"two bracket groups side by side in {node!r}: put them in one")
        head, values = rest[:opening], range_values(rest[opening + 1:closing], node)
        if len(names) * len(values) > MAX_NODES:
            raise NodeSetError(f"{node!r} expands to more than {MAX_NODES} hosts")
        names = [name + head + value for name in names for value in values]
        rest = rest[closing + 1:]
    if "]" in rest:
        raise NodeSetError(f"unbalanced brackets in {node!r}")
    return names


def range_values(body: str, node: str) -> List[str]:
    """The numbers of one bracket group: ``1-3,7`` -> 1, 2, 3, 7; ``01-10/3`` -> 01, 04,
    07, 10. A padded bound makes every number that wide; both bounds are then as wide."""
    values: List[str] = []
    items = [item.strip() for item in body.split(",")]
    if items == [""]:
        raise NodeSetError(f"empty brackets in {node!r}")
    for item in items:
        if item.isdigit():
            values.append(item)
            continue
        match = _STEPPED_RANGE.fullmatch(item)
        if match is None:
            raise NodeSetError(f"bad range [{body}] in {node!r}: use numbers, as in [01-20] "
                               f"or [1-9/2]")
        start, end, step_text = match.groups()
        first, last, step = int(start), int(end), int(step_text or 1)
        if first > last:
            raise NodeSetError(f"bad range [{body}] in {node!r}: {start} is after {end}")
        if step < 1:
            raise NodeSetError(f"bad range [{body}] in {node!r}: the step must be 1 or more")
        width = _width(start) or _width(end)
        if width and len(start) != len(end):
            raise NodeSetError(f"bad range [{body}] in {node!r}: {start} and {end} are "
                               f"padded to different widths")
        if len(values) + (last - first) // step >= MAX_NODES:
            raise NodeSetError(f"{node!r} expands to more than {MAX_NODES} hosts")
        values.extend(str(n).zfill(width) for n in range(first, last + 1, step))
    return values


def _width(digits: str) -> int:
    """The width a number is padded to (``007``: 3), 0 when it is not padded."""
    return len(digits) if len(digits) > 1 and digits.startswith("0") else 0


def expand_all(text: str) -> List[str]:
    """Every name of the node set ``text``, each once, in the order written."""
    names: Dict[str, None] = {}
    for operator, node in terms(text):
        names = combine(operator, names, dict.fromkeys(expand(node)))
        if len(names) > MAX_NODES:
            raise NodeSetError(f"{text!r} expands to more than {MAX_NODES} hosts")
    return list(names)


def combine(operator: str, left: Dict[str, None], right: Dict[str, None]) -> Dict[str, None]:
    """``left`` and ``right`` joined by ``operator`` (order kept: ``left``'s, then the
    new names of ``right``)."""
    if operator == ",":
        return {**left, **right}
    if operator == "!":
        return {name: None for name in left if name not in right}
    return {name: None for name in left if name in right}


_NUMBER_OR_RANGE = re.compile(r"\[[^\]]*\]|\d+")


def fold(names: Iterable[str]) -> str:
    """Names folded into a node set: ``web[01-05,07],db1``, ``rack[1-2]-n[1-3]``."""
    return ",".join(fold_parts(names))


def fold_parts(names: Iterable[str]) -> List[str]:
    """The nodes of :func:`fold`'s node set, in the order of the names' first appearance.

    Folds on the last number of each name, then again on the last number left
    outside brackets, until nothing more folds. Each distinct name counts once;
    zero-padded numbers keep their width (``01-10``); names without a number
    stay as they are.
    """
    parts = list(dict.fromkeys(names))
    while True:
        folded = _fold_once(parts)
        if folded == parts:
            return parts
        parts = folded


def _fold_once(names: List[str]) -> List[str]:
    groups: Dict[Tuple[str, str, int], List[Tuple[int, str]]] = defaultdict(list)
    order: List[Union[str, Tuple[str, str, int]]] = []
    for name in names:
        numbers = [m for m in _NUMBER_OR_RANGE.finditer(name) if m.group().isdigit()]
        if not numbers:
            order.append(name)
            continue
        last = numbers[-1]
        head, digits, tail = name[:last.start()], last.group(), name[last.end():]
        key = (head, tail, _width(digits))
        if not groups[key]:
            order.append(key)
        groups[key].append((int(digits), digits))
    # An unpadded number as wide as a padded group (the 10 of 01-10) joins that group.
    for key in [k for k in groups if k[2] == 0]:
        for value, digits in list(groups[key]):
            padded = (key[0], key[1], len(digits))
            if padded in groups:
                groups[padded].append((value, digits))
                groups[key].remove((value, digits))
    parts = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
        elif groups[item]:
            head, tail, width = item
            values = sorted({value for value, _ in groups[item]})
            if len(values) == 1:
                parts.append(f"{head}{str(values[0]).zfill(width)}{tail}")
            else:
                parts.append(f"{head}[{_ranges(values, width)}]{tail}")
    return parts


def _ranges(values: List[int], width: int) -> str:
    spans, start = [], values[0]
    following: List[Optional[int]] = [*values[1:], None]
    for previous, value in zip(values, following):
        if value is None or value != previous + 1:
            spans.append(str(start).zfill(width) if start == previous
                         else f"{str(start).zfill(width)}-{str(previous).zfill(width)}")
            if value is not None:
                start = value
    return ",".join(spans)
