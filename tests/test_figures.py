"""The benchmark figures of README.md and docs/ come from one place, benchmarks/results:
each page's marked blocks are what `python -m benchmarks.figures` writes from them, and the
README's performance summary has no figure typed outside such a block."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks import figures
from benchmarks.cpu_parts import per_host_ms

REPO = Path(__file__).resolve().parent.parent


def run_figures(*args):
    return subprocess.run([sys.executable, "-m", "benchmarks.figures", *args],
                          capture_output=True, text=True, timeout=60)


def test_every_page_shows_the_figures_the_stored_results_give():
    result = run_figures("--check", "--root", str(REPO))
    assert result.returncode == 0, result.stderr
    assert figures.stale(REPO) == []


def test_the_readme_summary_and_the_benchmark_page_are_generated_blocks():
    readme = (REPO / "README.md").read_text()
    page = (REPO / "docs" / "benchmarks.md").read_text()
    assert figures.blocks_in(readme) == ["readme-patch-effects", "unpatched-cost",
                                         "readme-performance"]
    assert set(figures.blocks_in(page)) >= {"ramp-operations", "ramp-channel-open",
                                            "sftp-results", "fanout-rtt50", "post-auth-stall"}
    # Every generator is used by some page, and every page's block has a generator.
    used = [name for path in figures.pages(REPO) for name in figures.blocks_in(path.read_text())]
    assert sorted(set(used)) == sorted(figures.BLOCKS)


def test_no_figure_in_the_readme_performance_section_is_typed_by_hand():
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Performance\n", 1)[1].split("\n#", 1)[0]
    outside = figures.BLOCK.sub("", section)
    assert not re.search(r"\d", outside), outside


#: A measured figure: a factor (3.4×, 2.1x), a rate or a duration. Versions (1.x) are not.
MEASURED = re.compile(r"(?<![\d.])\d[\d,]*(\.\d+)?\s?(×|MB/s|ms\b|sessions/s)"
                      r"|(?<![\d.])\d+(\.\d+)?x\b")


def test_the_readme_and_the_pages_quoting_benchmarks_have_no_measured_figure_outside_a_block():
    for page in (REPO / "README.md", *(REPO / "docs" / name for name in
                                      ("install.md", "asyncio.md", "scaling.md"))):
        outside = figures.BLOCK.sub("", page.read_text())
        assert [m[0] for m in MEASURED.finditer(outside)] == [], page


def test_every_stored_result_is_shown_and_every_figure_shown_is_stored(monkeypatch):
    loaded = set()
    real_load = figures.load

    def recording_load(name):
        loaded.add(name)
        return real_load(name)

    monkeypatch.setattr(figures, "load", recording_load)
    for make in figures.BLOCKS.values():
        make()
    assert loaded == {p.stem for p in figures.RESULTS.glob("*.json")}


def test_a_figure_typed_into_a_page_is_found_and_regenerated(tmp_path):
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "docs" / "benchmarks.md", tmp_path / "docs" / "benchmarks.md")
    readme = tmp_path / "README.md"
    original = readme.read_text()
    # The figure the issue found: typed into the README, found nowhere in the results.
    readme.write_text(original.replace("426 MB/s", "581 MB/s", 1))
    assert readme.read_text() != original
    check = run_figures("--check", "--root", str(tmp_path))
    assert check.returncode == 1
    assert "README.md: figures differ from benchmarks/results" in check.stderr
    assert "benchmarks.md" not in check.stderr
    rewrite = run_figures("--root", str(tmp_path))
    assert rewrite.returncode == 0 and "rewrote README.md" in rewrite.stderr
    assert readme.read_text() == original
    assert run_figures("--check", "--root", str(tmp_path)).returncode == 0


def test_a_block_of_an_unknown_name_is_an_error_not_left_as_it_is(tmp_path):
    (tmp_path / "README.md").write_text("<!-- figures:typo -->\n1 MB/s\n<!-- /figures -->\n")
    result = run_figures("--check", "--root", str(tmp_path))
    assert result.returncode != 0
    assert "unknown figures block 'typo'" in result.stderr


def close(computed, stored, tolerance):
    """Equal but for the rounding of the stored figures."""
    return abs(computed - stored) <= tolerance * abs(stored)


def test_the_stored_ratios_agree_with_the_stored_measurements():
    # A figure mistyped into a results file would put a ratio out of step with what it is a
    # ratio of (only where the run computed it from the same medians: per-round ratios are not).
    ramp = figures.load("ramp")
    for op, medians in ramp["median_ms"].items():
        for lib, speedup in ramp["speedup_vs_paramiko"][op].items():
            if speedup is not None and medians[lib] and medians["paramiko"]:
                assert close(medians["paramiko"] / medians[lib], speedup, 0.03), (op, lib)
    scaling = figures.load("scaling")
    single = {r["hosts"]: r["wall_s"] for r in scaling["rows"] if r["mode"] == "single"}
    for row in scaling["rows"]:
        limit = row["sshd_cpu_ms_per_login"] * row["hosts"] / scaling["cores"] / 1000
        assert close(limit, row["sshd_bound_limit_s"], 0.02), row
        assert close(row["wall_s"] / row["sshd_bound_limit_s"], row["wall_over_limit"], 0.02), row
        assert close(row["wall_s"] / single[row["hosts"]], row["wall_vs_single"], 0.02), row
        assert row["ok"] == row["hosts"]
    for hosts, walls in figures.load("fanout_rtt50")["wall_s"].items():
        assert close(walls["ours"] / walls["asyncssh"], walls["ours / asyncssh"], 0.02), hosts
    patches = figures.load("libssh2_patches")
    for name in ("0001-bulk-cipher-calls", "0005-chacha20-poly1305-on-evp"):
        cpu = patches[name]["cpu_ms_per_100mb"]
        assert cpu["after"] < cpu["before"], name


def test_the_stored_issue_29_results_hold_together():
    run = figures.load("cpu_per_host")
    for lib, calls in run["syscalls_per_login"]["by_library"].items():
        assert sum(count for _, count in calls["top"]) <= calls["total"] + 0.5, lib
    for lib in run["libraries"]:
        assert set(run["wall_s"][lib]) == {str(h) for h in run["hosts"]}, lib
    assert not set(run["unavailable"]) & set(run["libraries"])
    parts = run["cpu_ms_per_host_by_part"]
    assert set(parts["by_library"]) <= set(run["libraries"])
    for lib, measured in parts["by_library"].items():
        # The page's table is made from each run's samples by shared object (regrouped).
        samples = measured["samples"]
        assert set(samples) == {"1", str(parts["hosts"])}, lib
        per = per_host_ms(samples[str(parts["hosts"])], samples["1"], parts["hosts"],
                          parts["samples_per_cpu_second"])
        assert per["total"] > 0 and all(ms >= 0 for ms in per.values()), lib
    for name in ("ops_sync", "ops_sync_ssh2python", "ops_async"):
        for bench in figures.load(name)["benchmarks"]:
            stats = bench["stats"]
            assert stats["min"] <= stats["median"] <= stats["max"], (name, bench["name"])
