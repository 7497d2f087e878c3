"""The suite passes wherever the checkout is: under /tmp, in a folder whose path has a
space, read-only, with the package installed from elsewhere. A copy of this checkout's
source (tests/checkout.py) is put so and runs a representative part of the suite (what
reads the checkout, builds from it, runs programs of the tests' own by their path, starts
servers and the command line) against the installed package.

Read-only for root too, whom permission bits do not stop: as root the copy is bind-mounted
read-only in a mount namespace of the run's own (``unshare -m``); as another user its
permission bits say so (``chmod -R a-w``). Either way the test first checks that the copy
cannot be written, so that a pass means what it says.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys

from checkout import copy_source

#: Run from the copy, each for what it does with where the checkout is; one test of each
#: kind, so that the whole stays cheap (the build from the checkout, test_build_support's,
#: copies it first, and is left to the suite itself: it takes a pip build).
PART = [
    "test_suite_tools.py::test_ci_installs_every_extra_the_tests_name",  # reads ci/
    "test_layout.py::test_no_import_circle",  # reads the package's source, found by it
    # A program of the tests' own, importing them by their folder's path; sshd's files.
    "test_front_ends.py::test_the_default_identity_files_are_the_same[gevent]",
    # The command line in a subprocess against an asyncssh server of the tests'.
    "test_exit_status.py::test_the_command_line_says_what_happened",
]
#: The nested run's first /24 in this run's /16 (tests/loopback.py): far above the few
#: this run takes, so that no address is shared.
NESTED_NETWORK = "200"
#: Only a hang takes this long.
HANG = 600


def read_only(folder: str) -> list:
    """The command prefix that runs a command with ``folder`` read-only (and made so)."""
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", folder], check=True)
        return []
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && '
              'exec "$@"')
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", folder]


def test_the_suite_runs_from_a_read_only_copy_in_a_folder_with_a_space(tmp_path):
    folder = tmp_path / "a checkout"
    copy_source(folder)
    prefix = read_only(str(folder))
    probe = folder / "tests" / "written"
    try:
        denied = subprocess.run(
            [*prefix, "sh", "-c", f"! touch {shlex.quote(str(probe))} 2>/dev/null"])
        assert denied.returncode == 0, f"{folder} can be written: the check would prove nothing"
        env = dict(os.environ, PSSH_TESTS_FIRST_NETWORK=NESTED_NETWORK)
        env.pop("PYTEST_XDIST_WORKER", None)  # the nested run is one process: its /16 is ours
        env["PSSH_TESTS_SECOND_OCTET"] = str(_second_octet())
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
             "-n", "0", *PART], cwd=str(folder / "tests"), env=env, capture_output=True,
            text=True, timeout=HANG)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    finally:
        if os.geteuid() != 0:
            subprocess.run(["chmod", "-R", "u+w", str(folder)], check=True)
    assert not probe.exists()


def _second_octet() -> int:
    """This run's /16 (tests/loopback.py), which the nested run shares above our /24s."""
    from loopback import for_this_worker
    return for_this_worker().second
