"""The wheels that ``ci/test.sh`` builds beside the suite (``ci/wheels.sh``): built, each
installed where users install it and smoke-run against a real sshd.

``ci/test.sh`` without arguments starts the build before pytest and names its log in
``PSSH_TESTS_WHEELS_LOG``; the build writes its exit status beside it
(``<log>.status``) when it ends. This test waits for that and fails with the log's end
if the build failed, so that the wheels' result is in the suite's summary. A run of
pytest that did not start a build (``ci/test.sh -k ...``, pytest by hand) has none to
wait for.
"""
import os
from pathlib import Path

import pytest

from waiting import eventually

LOG = os.environ.get("PSSH_TESTS_WHEELS_LOG")
#: Seconds the build may take beyond the tests that ran before this one (alone it takes
#: about ten minutes; beside the suite, longer).
BUILD_LIMIT = 1500

pytestmark = pytest.mark.skipif(not LOG, reason="no wheel build was started beside this run "
                                "(ci/test.sh without arguments starts one)")


@pytest.mark.timeout(BUILD_LIMIT + 60)
def test_the_wheels_were_built_and_each_ran_where_users_install_it():
    status = Path(f"{LOG}.status")
    eventually(status.exists, timeout=BUILD_LIMIT, interval=5,
               what=f"the end of the wheel build (log: {LOG})")
    log = Path(LOG).read_text(errors="replace")
    code = int(status.read_text())
    assert code == 0, f"ci/wheels.sh failed (exit {code}); the end of its log:\n{log[-6000:]}"
    # What it says it did: every wheel built and smoke-run, the sdist made.
    assert "all wheels built and smoke-run" in log, log[-6000:]
    built = [line.split()[0] for line in log.splitlines()
             if line.strip().startswith("pssh2-") and line.strip().endswith(" s")]
    assert built, log[-6000:]
    for wheel in built:
        assert f"smoke run of {wheel}" in log, f"{wheel} was not smoke-run:\n{log[-6000:]}"
