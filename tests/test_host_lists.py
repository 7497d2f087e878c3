"""Host lists: ClusterShell's node-set grammar (checked against ClusterShell itself), the
``[user@]host[:port]`` nodes around it, labels and folding. Pure functions: no hosts."""
import pytest

from extras import imported
from pssh.cli.hosts import (HostSpec, UsageError, exclude, fold, labels, parse_hosts,
                            unique)
from pssh.cli.nodeset import NodeSetError, expand_all
from pssh.cli.nodeset import fold as fold_names

NodeSet = imported("ClusterShell.NodeSet").NodeSet
NodeSetParseError = imported("ClusterShell.NodeSet").NodeSetParseError

# (expression, whether ClusterShell folds the names to the same text as we do: it sorts
# the nodes and writes stepped ranges out, we keep the order written).
GRAMMAR = [
    ("web1", True),
    ("web1,web2", True),
    ("web[1-3],db1", False),            # ClusterShell: db1,web[1-3]; we: web[1-3],db1
    ("db1,web[1-3]", True),
    ("web[1-3,7]", True),
    ("n[01-10]", True),
    ("n[08-12]", True),
    ("n[099-101]", True),
    ("n[0-10]", True),
    ("n[007]", True),
    ("n[1-9/2]", True),
    ("n[01-10/3]", True),
    ("n[1-4/2,9]", True),
    ("rack[1-2]-n[1-3]", True),
    ("n[1-3]p[1-2]", True),
    ("n[1-2]x[01-02]", True),
    ("a-[1-2].b", True),
    ("[1-3]", True),
    ("10.0.0.[1-3]", True),
    ("n[0-2,1]", True),
    ("n[1-3],n[2-5]", True),
    ("n1,n2,n3,n5,n10", True),
    (" a , b ", True),
    ("n[ 1-2]", True),
    ("n[1 ,2]", True),
    ("web[01-40]", True),
    # ClusterShell's operators, read left to right: take away, keep the common ones.
    ("web[1-40]!web[13,27]", True),
    ("a[1-3]!a2,a5", True),
    ("a5,a[1-3]!a5", True),
    ("a[1-5]&a[3-8],b1", True),
    ("a[1-3] ! a2", True),
    ("a[1-5]!a[2-3]&a[1-4]", True),
    ("a[1-3]!a9", True),
]


@pytest.mark.parametrize("expression, same_fold", GRAMMAR)
def test_expansion_is_clustershells(expression, same_fold):
    names = expand_all(expression)
    theirs = list(NodeSet(expression))
    assert sorted(names) == sorted(theirs)
    assert len(names) == len(set(names))  # each node once, as in a set
    folded = fold_names(names)
    # Our fold is a node set ClusterShell reads back to the same nodes ...
    assert sorted(NodeSet(folded)) == sorted(theirs)
    # ... and our own expansion of it too (the round trip).
    assert sorted(expand_all(folded)) == sorted(names)
    if same_fold:
        assert folded == str(NodeSet(expression))


def test_names_keep_the_order_written():
    assert expand_all("web[1-3],db1") == ["web1", "web2", "web3", "db1"]
    assert fold_names(expand_all("web[1-3],db1")) == "web[1-3],db1"
    assert expand_all("rack[1-2]-n[1-2]") == ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]


@pytest.mark.parametrize("expression", [
    "n[3-1]", "n[001-3]", "n[1-010]", "n[01-100]", "n[]", "n[1-]", "n[1-3]]", "n1]", "n[1",
    "a,,b", ",a", "a,", "n[1-2][3-4]", "n[5/2]", "n[1-5/0]", "x[a,b]", "n[[1]]",
    "!a1", "a1!", "a1!!a2", "a1,!a2", "a1&",
])
def test_what_clustershell_refuses_is_refused(expression):
    with pytest.raises(NodeSetParseError):
        NodeSet(expression)
    with pytest.raises(NodeSetError):
        expand_all(expression)


def hosts(expression):
    return [(h.user, h.host, h.port) for h in parse_hosts([expression])]


@pytest.mark.parametrize("expression, expected", [
    # A node's user and port go with every name its brackets stand for.
    ("user@web[1-3]:2222", [("user", "web1", 2222), ("user", "web2", 2222),
                            ("user", "web3", 2222)]),
    # Commas separate nodes: each has its own user and port.
    ("u@a,b:2222", [("u", "a", None), (None, "b", 2222)]),
    ("a b,c", [(None, "a", None), (None, "b", None), (None, "c", None)]),
    ("[::1]:2222", [(None, "::1", 2222)]),
    ("[fe80::1]", [(None, "fe80::1", None)]),
    ("u@fe80::1", [("u", "fe80::1", None)]),
    ("127.0.0.[1-2]:22,[::1]:22", [(None, "127.0.0.1", 22), (None, "127.0.0.2", 22),
                                   (None, "::1", 22)]),
])
def test_users_ports_and_ipv6_around_node_sets(expression, expected):
    assert hosts(expression) == expected


@pytest.mark.parametrize("expression, message", [
    ("web[1-3]:", "bad port ''"),
    ("web:99999", "bad port '99999'"),
    ("@web", "empty user name"),
    ("[::1]x", "bad IPv6 address"),
])
def test_bad_nodes(expression, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[")):
        parse_hosts([expression])


def test_operators_act_within_their_expression_and_match_as_exclusions():
    # Within one -H: web2 is taken away on every port, as -x web2 would.
    assert hosts("web[1-3]:2222,web[1-3]!web2") == [
        (None, "web1", 2222), (None, "web3", 2222), (None, "web1", None), (None, "web3", None)]
    assert hosts("web[1-9]!web[3-9]*&web[1-5]") == [(None, "web1", None), (None, "web2", None)]
    # Each -H is a set of its own: the second does not take away from the first.
    assert [h.host for h in parse_hosts(["web1", "web[1-2]!web1"])] == ["web1", "web2"]


def test_exclusions_take_node_sets_globs_users_and_ports():
    fleet = parse_hosts(["web[01-40] db[1-2] web05:2222 u@web06"])
    left = exclude(fleet, ["web[13,27]", "db*"])
    assert [h.host for h in left if h.port is None and h.user is None] == \
        [f"web{n:02d}" for n in range(1, 41) if n not in (13, 27)]
    assert (None, "web05", 2222) in [(h.user, h.host, h.port) for h in left]
    # A port or user in the pattern must match as well.
    left = exclude(fleet, ["web05:2222,u@web06"])
    assert [h for h in left if h.host in ("web05", "web06")] == \
        [HostSpec("web05"), HostSpec("web06")]


def test_duplicates_are_one_host():
    assert unique(parse_hosts(["web1,web[1-2] web1:22 web1"])) == \
        [HostSpec("web1"), HostSpec("web2"), HostSpec("web1", port=22)]


@pytest.mark.parametrize("expression, port, expected", [
    # One port per address: the address alone, unless a port was written with it.
    ("a,b", None, ["a", "b"]),
    ("a,b:2222", 22, ["a", "b:2222"]),
    # Two entries on one address: both with their ports (the run's for the one without).
    ("a:2201,a:2202", None, ["a:2201", "a:2202"]),
    ("a,a:2202", 2201, ["a:2201", "a:2202"]),
    ("a,a:2202", None, ["a", "a:2202"]),
    ("[::1]:2201,::1", 2202, ["[::1]:2201", "[::1]:2202"]),
    # Only the user tells them apart: the user is shown.
    ("u@a,v@a", None, ["u@a", "v@a"]),
])
def test_labels_tell_every_entry_apart(expression, port, expected):
    named = labels(parse_hosts([expression]), port)
    assert named == expected
    assert len(set(named)) == len(named)


@pytest.mark.parametrize("named", [
    ["127.0.0.1:2201", "127.0.0.2:2201", "127.0.0.1:2202"],
    ["u@web1", "u@web2", "web3", "v@web4:22"],
    ["[::1]:2201", "[::1]:2202", "web1", "web2"],
    ["n01", "n02", "n03", "n10"],
])
def test_folded_labels_read_back_to_the_same_hosts(named):
    folded = fold(named)
    assert sorted(hosts(folded), key=str) == sorted(
        (entry for label in named for entry in hosts(label)), key=str)
    assert len(folded.split(",")) < len(named)
