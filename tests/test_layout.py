"""The layout keeps the architecture: core, runners, API shells, command line.

Read from the source (every import statement, those inside functions too, but not
``if TYPE_CHECKING:`` blocks): no import circle anywhere in ``pssh``; the core imports
only itself, ``ssh2`` and the standard library (no event loop, nothing of the runners,
the shells or the command line); the runners import the core and their loop only;
neither front end imports the other. Across layers, nothing private is imported and no
class is filled in from elsewhere (a base class that a subclass registers itself into
depends on that subclass, a circle no import graph shows). Across packages, no private
name of another package is used: read on an object, inherited through ``self``,
overridden, or passed as a keyword (parallel-ssh's own underscore API apart, and the
uses listed in :data:`NOT_YET` with why). In :mod:`pssh.fanout` the transports know
nothing of the jobs, and the jobs nothing of the transports.
"""
import ast
import functools
import os
import sys

import pytest

import pssh

ROOT = os.path.dirname(pssh.__file__)


def modules():
    """``{module name: path}`` of every module of the pssh package."""
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = "pssh." + os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[module.removesuffix(".__init__")] = path
    return found


def imports(module: str, path: str, known) -> set:
    """The modules ``module`` imports (anywhere in its file), by full name; a name imported
    from a package that is a module of its own counts as that module."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            skipped.update(id(n) for n in ast.walk(node))
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        else:
            continue
        found.update(names)
    return found


MODULES = modules()
GRAPH = {module: imports(module, path, MODULES) for module, path in MODULES.items()}


def pssh_edges(module: str) -> set:
    """The pssh modules ``module`` imports (a package's name stands for its __init__)."""
    known = set(GRAPH)
    edges = set()
    for name in GRAPH[module]:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name.startswith("pssh") and name != module:
            edges.add(name)
    return edges


def cycles() -> list:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in pssh_edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    assert cycles() == []


def in_layer(prefix: str):
    return [m for m in GRAPH if m == prefix or m.startswith(prefix + ".")]


LOOPS = {"gevent", "asyncio", "uvloop"}


@pytest.mark.parametrize("module", in_layer("pssh.core"))
def test_the_core_imports_only_itself_ssh2_and_the_standard_library(module):
    top = {name.split(".")[0] for name in GRAPH[module]}
    # cryptography: host certificates' signatures (a dependency of the package, no loop).
    assert top <= set(sys.stdlib_module_names) | {"ssh2", "pssh", "__future__",
                                                  "cryptography"}, module
    assert not top & LOOPS, module
    assert all(m.startswith("pssh.core") for m in pssh_edges(module)), pssh_edges(module)


@pytest.mark.parametrize("module", in_layer("pssh.runners"))
def test_runners_drive_the_core_only(module):
    assert all(m.startswith(("pssh.core", "pssh.runners", "pssh.core.deadlines"))
               for m in pssh_edges(module)), pssh_edges(module)


@pytest.mark.parametrize("module", in_layer("pssh.clients"))
def test_the_gevent_shell_does_not_use_the_asyncio_one(module):
    assert not [m for m in pssh_edges(module) if m.startswith("pssh.aio")]
    assert "asyncio" not in {name.split(".")[0] for name in GRAPH[module]} or \
        module.startswith("pssh.clients.cluster")  # Dask's client is asyncio-based


@pytest.mark.parametrize("module", in_layer("pssh.aio"))
def test_the_asyncio_shell_does_not_use_the_gevent_one(module):
    assert not [m for m in pssh_edges(module) if m.startswith("pssh.clients")]
    assert "gevent" not in {name.split(".")[0] for name in GRAPH[module]}


def test_every_layer_says_what_it_owns_and_may_import():
    for package in ("pssh.core", "pssh.runners", "pssh.clients", "pssh.aio", "pssh.cli",
                    "pssh.fanout"):
        doc = ast.get_docstring(ast.parse(open(modules()[package]).read())) or ""
        assert "import" in doc.lower(), package


def layer(module: str) -> str:
    """The layer a module belongs to: ``pssh.<package>`` (a top-level module is its own)."""
    return ".".join(module.split(".")[:2])


def trees():
    return {module: ast.parse(open(path, encoding="utf-8").read())
            for module, path in modules().items()}


TREES = trees()


def imported_from(module: str) -> dict:
    """``{name bound in module: the pssh module it was imported from}``."""
    found = {}
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pssh") \
                and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_nothing_private_is_imported_from_another_layer(module):
    private = [f"{node.module}.{alias.name}" for node in ast.walk(TREES[module])
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pssh")
               and layer(node.module) != layer(module)
               for alias in node.names
               if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert private == [], module


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_class_is_filled_in_from_another_module(module):
    """``Base.registry = Sub`` (or ``setattr(Base, ...)``) on a name imported from another
    module: the base then depends on whoever fills it in."""
    names = {name for name in imported_from(module) if name[:1].isupper()}  # classes
    filled = []
    for node in ast.walk(TREES[module]):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id in names:
                filled.append(f"{target.value.id}.{target.attr}")
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" \
                and node.args and isinstance(node.args[0], ast.Name) \
                and node.args[0].id in names:
            filled.append(f"setattr({node.args[0].id}, ...)")
    assert filled == [], module


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_constructor_makes_another_class(module):
    """A ``__new__`` that rebinds ``cls`` hands out a class of someone else's choosing
    (a subclass, found in a registry): the caller's class depends on it."""
    swapped = []
    for cls in ast.walk(TREES[module]):
        if not isinstance(cls, ast.ClassDef):
            continue
        for method in cls.body:
            if isinstance(method, ast.FunctionDef) and method.name == "__new__":
                swapped += [f"{cls.name}.__new__" for node in ast.walk(method)
                            if isinstance(node, (ast.Assign, ast.AugAssign))
                            for target in (node.targets if isinstance(node, ast.Assign)
                                           else [node.target])
                            if isinstance(target, ast.Name) and target.id == "cls"]
    assert swapped == [], module


#: Steps the core composes, by module: the connect sequence (pssh.core.establish's
#: Dialer, begin_session, start_services, establish) and the forwarding (tunnels, relays,
#: forward_connection, serve_local). A front end calls the compositions, or the core
#: procedure of one step it lets programs replace (check_host_key, start_keepalive, the
#: login order), never these: with them it would be composing the sequence again.
COMPOSED_STEPS = {
    "pssh.core.connect": {"open_socket"},
    "pssh.core.handshake": {"handshake", "start_session"},
    "pssh.core.establish": {"forward_agent"},
    "pssh.core.forwarding": {"AgentForwarding", "open_tunnel", "recv", "relay", "send_all"},
}


def composed_steps_used(tree) -> list:
    """The names of :data:`COMPOSED_STEPS` a module imports or reaches through a module it
    imported (``from pssh.core import forwarding as f`` ... ``f.relay``)."""
    used, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in COMPOSED_STEPS:
            used += [f"{node.module}.{a.name}" for a in node.names
                     if a.name in COMPOSED_STEPS[node.module]]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if f"{node.module}.{a.name}" in COMPOSED_STEPS:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in COMPOSED_STEPS:
                    aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            module = aliases.get(ast.unparse(node.value))
            if module is not None and node.attr in COMPOSED_STEPS[module]:
                used.append(f"{module}.{node.attr}")
    return used


@pytest.mark.parametrize("module", [m for m in sorted(GRAPH) if layer(m) != "pssh.core"])
def test_front_ends_call_the_cores_compositions_not_their_steps(module):
    assert composed_steps_used(TREES[module]) == [], module


# -- private names of another package ---------------------------------------------------

#: parallel-ssh's own layout of its gevent client: ``base/`` and ``native/`` (and ``ssh/``,
#: its other binding's) are one client split in two, whose classes subclass one another
#: and share their state by design, as parallel-ssh's do; ``reader`` and ``common`` are
#: theirs. One unit for the checks below; every other package is a unit of its own.
ONE_CLIENT = ("pssh.clients", "pssh.clients.base", "pssh.clients.native", "pssh.clients.ssh")

#: parallel-ssh's underscore API, which programs written for it override or call (its
#: own subclasses and users' do): private by name, public by use, so kept as it is
#: wherever it is met.
PARALLEL_SSH_API = {"_connect", "_init_session", "_auth_retry", "_keepalive",
                    "_make_ssh_client", "_execute", "_make_sftp", "_eagain"}

#: Private names of another package still used, each with why it is not public yet;
#: ``(module, name)``. Remove an entry with its use.
NOT_YET = {
    # Task._cancel is how a runner tells a core Task how to cancel it: pssh/core/waits.py
    # and pssh/runners/virtual.py are being changed by another engineer, and a public
    # setter goes with that change.
    ("pssh.runners.asyncio", "_cancel"), ("pssh.runners.gevent", "_cancel"),
    ("pssh.runners.virtual", "_cancel"),
    # SSHClient(_jump_hosts=..., _options=...): pssh/poll/ is being changed by another
    # engineer; SSHClient.from_options is the public form to move to.
    ("pssh.poll.sessions", "_jump_hosts"), ("pssh.poll.sessions", "_options"),
}


def unit(module: str) -> str:
    """The package ``module`` belongs to for these checks (see :data:`ONE_CLIENT`)."""
    path = MODULES.get(module, "")
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    return "pssh.clients" if package in ONE_CLIENT else package


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names(tree: ast.AST) -> tuple:
    """``(names, defs, params)``: the private names ``tree`` defines (functions, classes,
    ``self.``/``cls.`` attributes and other assignments, ``__slots__``, parameters), its
    private functions and methods alone, and its private parameters."""
    names, defs, params = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and is_private(node.name):
            names.add(node.name)
            if not isinstance(node, ast.ClassDef):
                defs.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for part in ast.walk(target):
                    if isinstance(part, ast.Name) and is_private(part.id):
                        names.add(part.id)
                    elif isinstance(part, ast.Attribute) and is_private(part.attr) \
                            and getattr(part.value, "id", "") in ("self", "cls"):
                        names.add(part.attr)
                if getattr(target, "id", "") == "__slots__":
                    names.update(c.value for c in ast.walk(node.value)
                                 if isinstance(c, ast.Constant) and isinstance(c.value, str))
        elif isinstance(node, ast.arg) and is_private(node.arg):
            names.add(node.arg)
            params.add(node.arg)
    return names, defs, params


@functools.lru_cache(maxsize=None)
def by_unit():
    """``{unit: (names, defs, params)}`` over every module of the unit."""
    found: dict = {}
    for module, tree in TREES.items():
        names, defs, params = found.setdefault(unit(module), (set(), set(), set()))
        more = private_names(tree)
        names |= more[0]
        defs |= more[1]
        params |= more[2]
    return found


def elsewhere(name: str, here: str, kind: int = 0) -> list:
    """The units other than ``here`` that define ``name`` (``kind``: 0 any way, 1 as a
    function or method)."""
    return sorted(u for u, defined in by_unit().items() if u != here and name in defined[kind])


def own_reference(node: ast.Attribute) -> bool:
    """``self.x``, ``cls.x`` or ``super().x``: the object's own (or inherited) name."""
    value = node.value
    return getattr(value, "id", "") in ("self", "cls") or (
        isinstance(value, ast.Call) and getattr(value.func, "id", "") == "super")


def private_uses(module: str) -> list:
    """Private names of another package that ``module`` uses: read or set on an object
    (``buffer._chunks``), inherited through ``self`` from another package's class,
    overridden in a subclass of another package's class, or passed as a keyword
    argument (``SSHClient(_options=...)``)."""
    here = unit(module)
    names, _, params = by_unit().get(here, (set(), set(), set()))
    bases = imported_from(module)
    found = []
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Attribute) and is_private(node.attr) \
                and node.attr not in names and elsewhere(node.attr, here):
            how = "inherited" if own_reference(node) else "used"
            found.append((node.attr, f"{how}: {ast.unparse(node)} "
                                     f"({', '.join(elsewhere(node.attr, here))})"))
        elif isinstance(node, ast.keyword) and node.arg and is_private(node.arg) \
                and node.arg not in params:
            found.append((node.arg, f"keyword {node.arg}= in a call of "
                                    f"{_callee(node, module)}"))
        elif isinstance(node, ast.ClassDef):
            theirs = {unit(bases[b.id]) for b in node.bases
                      if isinstance(b, ast.Name) and b.id in bases and bases[b.id] in GRAPH}
            for method in node.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and is_private(method.name):
                    overridden = [u for u in elsewhere(method.name, here, 1) if u in theirs]
                    if overridden:
                        found.append((method.name, f"overridden: {node.name}.{method.name} "
                                                   f"({', '.join(overridden)})"))
    return [what for name, what in found
            if name not in PARALLEL_SSH_API and (module, name) not in NOT_YET]


def _callee(keyword: ast.keyword, module: str) -> str:
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Call) and keyword in node.keywords:
            return ast.unparse(node.func)
    return "?"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_private_name_of_another_package_is_used(module):
    assert private_uses(module) == [], module


FANOUT_JOBS = ("pssh.fanout.run", "pssh.fanout.poll")
FANOUT_SHARED = ("pssh.fanout", "pssh.fanout.link", "pssh.fanout.signals")


def is_job(module: str) -> bool:
    return any(module == job or module.startswith(job + ".") for job in FANOUT_JOBS)


@pytest.mark.parametrize("module", [m for m in in_layer("pssh.fanout") if not is_job(m)])
def test_fanout_transports_know_no_job(module):
    assert not [m for m in pssh_edges(module)
                if is_job(m) or layer(m) in ("pssh.clients", "pssh.poll", "pssh.cli")]


@pytest.mark.parametrize("module", [m for m in in_layer("pssh.fanout") if is_job(m)])
def test_fanout_jobs_know_no_transport(module):
    assert not [m for m in pssh_edges(module) if layer(m) == "pssh.fanout"
                and not is_job(m) and m not in FANOUT_SHARED]


def test_the_checks_see_what_they_are_for():
    """The registry and the private import this layout once had are caught."""
    tree = ast.parse("from pssh.clients.native.parallel import ParallelSSHClient\n"
                     "from pssh.clients.sharded.process import _worker_environment\n"
                     "class Sub(ParallelSSHClient):\n    pass\n"
                     "ParallelSSHClient.sharded_class = Sub\n"
                     "class Base:\n    def __new__(cls, *a, processes=None):\n"
                     "        if processes:\n            cls = Base.sharded_class\n"
                     "        return super().__new__(cls)\n")
    TREES["pssh.poll.example"] = tree
    assert composed_steps_used(ast.parse(
        "from pssh.core.handshake import Attempt, start_session\n"
        "from pssh.core import forwarding as fw\nimport pssh.core.connect\n"
        "fw.relay(link, chan, sock, 'x'); fw.serve_local(link, s, 'h', 1)\n"
        "pssh.core.connect.open_socket(dest)\n")) == [
        "pssh.core.handshake.start_session", "pssh.core.forwarding.relay",
        "pssh.core.connect.open_socket"]
    try:
        with pytest.raises(AssertionError):
            test_nothing_private_is_imported_from_another_layer("pssh.poll.example")
        with pytest.raises(AssertionError):
            test_no_class_is_filled_in_from_another_module("pssh.poll.example")
        with pytest.raises(AssertionError):
            test_no_constructor_makes_another_class("pssh.poll.example")
    finally:
        del TREES["pssh.poll.example"]


def test_the_private_use_check_sees_each_kind():
    """Each way a package once used another's private names is caught: a method of a
    base class overridden, its state read through ``self``, an object's private
    attribute, a private keyword argument."""
    by_unit()  # (made from the package as it is, before the example joins it)
    TREES["pssh.poll.example"] = ast.parse(
        "from pssh.clients.native.parallel import ParallelSSHClient\n"
        "from pssh.clients.native.single import SSHClient\n"
        "class Mine(ParallelSSHClient):\n"
        "    def _get_ssh_client(self, host_i, host):\n"
        "        return self._host_clients\n"
        "def use(local, buffer):\n"
        "    SSHClient('h', _jump_hosts=None)\n"
        "    return local._sharded, buffer._chunks\n")
    try:
        found = private_uses("pssh.poll.example")
    finally:
        del TREES["pssh.poll.example"]
    assert sorted(what.split(" (")[0] for what in found) == [
        "inherited: self._host_clients", "keyword _jump_hosts= in a call of SSHClient",
        "overridden: Mine._get_ssh_client", "used: buffer._chunks", "used: local._sharded"]
