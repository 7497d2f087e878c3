"""The documentation site: it builds with warnings as errors, every Python example in it runs
against real sshd hosts, and its pages render in a real headless browser (Debian's chromium)."""
import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from extras import require
from loopback import addresses
from pssh.sshd import ServerGroup
from test_cli import ENV

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
# The example hosts of the docs, as an ssh config makes them real: name -> server index.
NAMES = {"web1": 0, "web2": 1, "web3": 2, "db1": 3, "bastion": 4}
_FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def examples(page: Path):
    return _FENCE.findall(page.read_text())


PAGES = sorted(p for p in DOCS.rglob("*.md") if examples(p))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Hosts web1..3, db1 and bastion behind a ~/.ssh/config in a home of their own."""
    home = tmp_path_factory.mktemp("home")
    with ServerGroup(addresses=addresses(len(NAMES))) as group:
        ssh = home / ".ssh"
        ssh.mkdir()
        for suffix in ("", ".pub"):
            shutil.copy(group.keys.private() + suffix, ssh / f"id_ed25519{suffix}")
        (ssh / "config").write_text("".join(
            f"Host {name}\n    HostName {group.hosts[i]}\n" for name, i in NAMES.items())
            + f"Host *\n    Port {group.port}\n    IdentityFile {ssh / 'id_ed25519'}\n"
              f"    IdentitiesOnly yes\n    UserKnownHostsFile {ssh / 'known_hosts'}\n")
        # The hosts' keys, as a user has them (pssh.aio, as asyncssh, records none itself).
        (ssh / "known_hosts").write_text("".join(s.known_hosts_lines() for s in group))
        yield group, home


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_every_python_example_runs(page, world, tmp_path, monkeypatch):
    group, home = world
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.chdir(tmp_path)
    # The names the bindings' page says stand for your server, login and key.
    namespace = {"__name__": "__docs__", "HOST": group.hosts[0], "PORT": group.port,
                 "USER": group.servers[0].user, "KEY": str(home / ".ssh" / "id_ed25519")}
    try:
        for number, code in enumerate(examples(page), 1):
            try:
                exec(compile(code, f"{page.name} example {number}", "exec"), namespace)
            except BaseException as err:
                raise AssertionError(f"{page.relative_to(REPO)}, example {number} failed: "
                                     f"{type(err).__name__}: {err}\n{code}") from err
    finally:
        # The examples leave their clients to the collector, as a short program may (and
        # a name such as host_output keeps a host's client alive): closed here, so that
        # their connections end with the test.
        from pssh.clients import ParallelSSHClient, SSHClient
        from pssh.output import HostOutput
        for value in namespace.values():
            if isinstance(value, HostOutput):
                value = value.client
            if isinstance(value, (ParallelSSHClient, SSHClient)):
                value.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built as ci/docs.sh builds it: strict, warnings are errors."""
    require("mkdocs")
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
         "-d", str(out)], capture_output=True, text=True, timeout=300,
        env=dict(ENV, NO_MKDOCS_2_WARNING="1"), cwd="/")
    assert build.returncode == 0, build.stdout + build.stderr
    return out


def test_the_site_builds_with_warnings_as_errors(site):
    assert (site / "index.html").exists() and (site / "api" / "ssh2" / "index.html").exists()
    reference = (site / "cli" / "index.html").read_text()
    for name in ("pssh run", "pssh ping", "pssh hosts", "--gather", "--processes"):
        assert name in reference  # written from the argparse definitions


@pytest.fixture
def browser():
    """Debian's chromium, headless, for one test: it starts a renderer per page it shows,
    and they end with it (a module's browser would keep them past the test)."""
    require("selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on loopback, as a browser would fetch it."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *args: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_pages_render_in_a_headless_browser(browser, served, site):
    from selenium.webdriver.common.by import By
    browser.get(served + "/")
    assert "pssh2" in browser.title
    nav = browser.find_element(By.CSS_SELECTOR, "nav.md-nav--primary").get_attribute(
        "textContent")
    for entry in ("Guides", "Parallel commands", "API reference", "Benchmarks"):
        assert entry in nav
    screenshot = site.parent / "docs-home.png"
    browser.save_screenshot(str(screenshot))
    print("screenshot:", screenshot)
    assert screenshot.stat().st_size > 10_000

    browser.get(served + "/api/ssh2/")
    heading = browser.find_element(By.ID, "ssh2.session.Session.handshake")
    assert "handshake" in heading.text
    assert "Start the SSH session" in browser.find_element(By.TAG_NAME, "body").text

    browser.get(served + "/benchmarks/")
    chart = browser.find_element(By.CSS_SELECTOR, "img[src$='scaling.png']")
    loaded = browser.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth", chart)
    assert loaded > 100  # the chart image arrived and decoded

    browser.get(served + "/cli/")
    assert "pssh hosts" in browser.find_element(By.TAG_NAME, "article").text
