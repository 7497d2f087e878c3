"""The suite's own tools: the extras it names exist and CI installs them; the loopback
addresses it hands out never meet."""
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

from extras import EXTRA_OF, install_command
from loopback import LoopbackAddresses, for_this_worker, worker_number

REPO = Path(__file__).resolve().parent.parent


def extras_of_pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    return {name: {re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower().replace("_", "-")
                   for req in reqs} for name, reqs in extras.items()}


@pytest.mark.parametrize("module", sorted(EXTRA_OF))
def test_each_module_the_tests_need_is_in_the_extra_they_name(module):
    distributions = {d.lower().replace("_", "-")
                     for d in importlib.metadata.packages_distributions().get(module, [])}
    assert distributions, f"{module} is not installed: {install_command(module)}"
    assert distributions & extras_of_pyproject()[EXTRA_OF[module]], \
        f"pyproject.toml's [{EXTRA_OF[module]}] extra does not hold {module}"


def test_ci_installs_every_extra_the_tests_name():
    setup = (REPO / "ci" / "setup.sh").read_text()
    installed = re.search(r'pip install -q "\.\[([a-z,]+)\]"', setup).group(1).split(",")
    assert set(EXTRA_OF.values()) <= set(installed)


def test_install_command_names_the_package_and_its_extras():
    assert install_command("distributed", "uvloop") == "pip install 'pssh2[aio,dask]'"


def test_addresses_are_never_handed_out_twice_and_a_block_stays_in_one_network():
    allocator = LoopbackAddresses(100)
    blocks = [allocator.take(n) for n in (3, 250, 1, 200, 254, 2)]
    every = [a for block in blocks for a in block]
    assert len(every) == len(set(every))
    for block in blocks:
        assert len({a.rsplit(".", 1)[0] for a in block}) == 1   # one /24
        last = [int(a.rsplit(".", 1)[1]) for a in block]
        assert last == list(range(last[0], last[0] + len(block)))   # consecutive
    assert all(a.startswith("127.100.") and not a.startswith("127.100.0.") for a in every)


def test_xdist_workers_get_networks_of_their_own():
    assert worker_number("gw0") == 0 and worker_number("gw7") == 7
    first, second = for_this_worker("gw0").take(1)[0], for_this_worker("gw1").take(1)[0]
    assert first.split(".")[1] != second.split(".")[1]
