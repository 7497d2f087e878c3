"""pssh.poll parsers and checks: device output -> values; bad output -> ValueError saying why."""
import pytest

from pssh.poll import Check, parsers
from pssh.poll.parsers import (df, json_values, key_value, loadavg, named_number, number,
                               parser_from_spec, regex)

DF_P = """\
Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/sda1         41152736  20576368  18462552      53% /
tmpfs               814112         0    814112       0% /run/user/0
/dev/sdb1          1000000    250000    750000      25% /mnt/my data
"""


def test_number_takes_one_number_with_surrounding_space():
    assert number(" 42\n") == {"value": 42.0}
    assert number("-1.5e3") == {"value": -1500.0}
    assert named_number("users")("7\n") == {"users": 7.0}


@pytest.mark.parametrize("bad", ["", "abc", "1 2", "12%"])
def test_number_refuses_anything_else(bad):
    with pytest.raises(ValueError, match="expected one number"):
        number(bad)


def test_key_value_reads_both_forms_and_converts_values():
    out = "a=1\nb: 2.5\n\n  c = text with spaces \nflag: true\nneg=-3\n"
    assert key_value(out) == {"a": 1, "b": 2.5, "c": "text with spaces", "flag": True,
                              "neg": -3}


def test_key_value_names_the_bad_line():
    with pytest.raises(ValueError, match="'no separator here'"):
        key_value("a=1\nno separator here\n")
    with pytest.raises(ValueError, match="no output"):
        key_value("\n\n")


def test_json_values_flatten_nested_objects_and_lists():
    out = '{"cpu": {"user": 1.5, "sys": 2}, "disks": [{"name": "sda"}, 7], "up": true, ' \
          '"gone": null}'
    assert json_values(out) == {"cpu.user": 1.5, "cpu.sys": 2, "disks.0.name": "sda",
                                "disks.1": 7, "up": True}
    assert json_values("3.5") == {"value": 3.5}


def test_json_values_refuse_bad_json():
    with pytest.raises(ValueError, match="expected JSON"):
        json_values("{not json")


def test_loadavg():
    assert loadavg("0.52 0.58 0.59 1/389 12345\n") == {
        "load1": 0.52, "load5": 0.58, "load15": 0.59, "running": 1, "total": 389}
    with pytest.raises(ValueError, match="loadavg"):
        loadavg("0.52 0.58")


def test_df_per_mount_point_in_kilobytes():
    values = df(DF_P)
    assert values["/.used_pct"] == 53.0
    assert values["/.size_kb"] == 41152736
    assert values["/run/user/0.used_kb"] == 0
    assert values["/mnt/my data.avail_kb"] == 750000
    half = df(DF_P.replace("1024-blocks", "512-blocks"))
    assert half["/.size_kb"] == 41152736 / 2


def test_df_refuses_other_output():
    with pytest.raises(ValueError, match="df -P"):
        df("hello\n")
    with pytest.raises(ValueError, match="df -P line"):
        df(DF_P.splitlines()[0] + "\n/dev/x 1 2\n")


def test_regex_gives_named_groups():
    parse = regex(r"^Mem:\s+(?P<total>\d+)\s+(?P<used>\d+)")
    assert parse("              total        used\nMem:  1000  250 x\n") == {
        "total": 1000, "used": 250}
    with pytest.raises(ValueError, match="does not match"):
        parse("Swap: 0 0")
    with pytest.raises(ValueError, match="no named group"):
        regex(r"(\d+)")
    with pytest.raises(ValueError, match="bad regular expression"):
        regex(r"(?P<x>")


def test_parser_from_spec_knows_the_built_ins_regex_and_module_functions():
    assert parser_from_spec("number") is number
    assert parser_from_spec("kv") is key_value
    assert parser_from_spec("json") is json_values
    assert parser_from_spec("loadavg") is loadavg
    assert parser_from_spec("df") is df
    assert parser_from_spec("regex:(?P<n>\\d+)")("x 12") == {"n": 12}
    assert parser_from_spec("pssh.poll.parsers:loadavg") is parsers.loadavg
    with pytest.raises(ValueError, match="unknown parser 'nope'"):
        parser_from_spec("nope")
    with pytest.raises(ValueError, match="cannot be loaded"):
        parser_from_spec("no_such_module_here:f")


def test_check_from_spec():
    plain = Check.from_spec("users=who | wc -l")
    assert (plain.name, plain.command, plain.parser) == ("users", "who | wc -l", number)
    load = Check.from_spec("load:loadavg=cat /proc/loadavg")
    assert (load.name, load.command, load.parser) == ("load", "cat /proc/loadavg", loadavg)
    mem = Check.from_spec("mem:regex:(?P<free>\\d+) free=free -m | tail -1")
    assert mem.parser("12 free") == {"free": 12}
    assert mem.command == "free -m | tail -1"


@pytest.mark.parametrize("spec, message", [("no equals sign", "NAME=COMMAND"),
                                           ("bad name=true", "check name"),
                                           ("x=   ", "empty command"),
                                           ("x:what=true", "unknown parser")])
def test_check_from_spec_refuses_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        Check.from_spec(spec)


def test_check_deadline_defaults_to_the_interval():
    assert Check("a", "true").deadline(10.0) == 10.0
    assert Check("a", "true", timeout=3).deadline(10.0) == 3
