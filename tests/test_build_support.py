"""The source build's libssh2 step (build_support/) and the version users see.

build_support is not installed: it is imported from the checkout, as setup.py does.
"""
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tomllib

import pytest

import checkout
import ssh2
from checkout import copy_source

REPO = str(checkout.REPO)


def _checkout_package(name):
    # Registered in sys.modules, NOT by putting the checkout on sys.path: worker
    # processes spawned by later tests inherit sys.path and would then import the
    # uncompiled ssh2 of the checkout.
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(REPO, name, "__init__.py"),
        submodule_search_locations=[os.path.join(REPO, name)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_checkout_package("build_support")
from build_support import apt_sources, libssh2  # noqa: E402

ONE_LINE = """\
# a comment, and a deb-src line with options spanning words
deb [ arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg ] http://mirror.invalid/debian bookworm main
deb-src http://mirror.invalid/debian bookworm main
deb http://security.invalid/debian-security bookworm-security main
"""  # noqa: E501 - a sources.list line as apt has it: one line, however long
DEB822 = """\
Types: deb
URIs: https://packages.vendor.invalid/apt
Suites: nodistro
Components: main
Signed-By: /usr/share/keyrings/vendor.gpg

Types: deb
URIs: http://disabled.invalid/debian
Suites: trixie
Components: main
Enabled: no

Types: deb deb-src
# a comment inside a stanza
URIs: http://cache.invalid/debian
Suites: trixie trixie-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://cache.invalid/debian-security
Suites: trixie-security
Components: main
"""


def write_apt(tmp_path, sources_list=None, parts=()):
    (tmp_path / "sources.list.d").mkdir()
    if sources_list is not None:
        (tmp_path / "sources.list").write_text(sources_list)
    for name, text in parts:
        (tmp_path / "sources.list.d" / name).write_text(text)
    return str(tmp_path)


def test_one_line_sources_list(tmp_path):
    apt = write_apt(tmp_path, ONE_LINE)
    assert apt_sources.debian_archive(apt) == "http://mirror.invalid/debian"
    assert apt_sources.debian_security(apt) == "http://security.invalid/debian-security"


def test_deb822_sources_skip_other_vendors_and_disabled_entries(tmp_path):
    apt = write_apt(tmp_path, None, [("a-vendor.sources", DEB822.split("\n\n")[0] + "\n"),
                                     ("debian.sources", DEB822)])
    assert apt_sources.debian_archive(apt) == "http://cache.invalid/debian"
    assert apt_sources.debian_security(apt) == "http://cache.invalid/debian-security"


def test_sources_list_comes_before_the_parts_directory(tmp_path):
    apt = write_apt(tmp_path, ONE_LINE, [("debian.sources", DEB822)])
    assert apt_sources.debian_archive(apt) == "http://mirror.invalid/debian"


def test_no_debian_mirror_names_where_it_looked(tmp_path):
    apt = write_apt(tmp_path, "deb https://packages.vendor.invalid/apt nodistro main\n")
    with pytest.raises(apt_sources.NoDebianMirror, match=r"sources\.list\.d/\*\.list, \*\.sources"):
        apt_sources.debian_archive(apt)
    assert apt_sources.debian_security(apt) is None


def test_this_machines_mirror_is_the_one_its_apt_uses():
    configured = "".join(open(os.path.join(root, name), errors="replace").read()
                         for root, _, names in os.walk("/etc/apt")
                         for name in names if name.endswith((".list", ".sources")))
    assert apt_sources.debian_archive() in configured


def test_build_support_names_no_mirror_host():
    for name in ("libssh2.py", "apt_sources.py", "wheel_libssh2.sh"):
        text = open(os.path.join(REPO, "build_support", name)).read()
        assert "deb.debian.org" not in text and "http://" not in text.replace(
            "``http://<mirror>/debian``", ""), name


def test_without_apt_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))   # no apt-get, no dpkg-source
    monkeypatch.setenv("LIBSSH2_BUNDLE", "1")
    monkeypatch.delenv("LIBSSH2_PREFIX", raising=False)
    with pytest.raises(libssh2.LibSSH2NotFound) as info:
        libssh2.locate(str(tmp_path / "scratch"))
    message = str(info.value)
    assert "libssh2 >= 1.11" in message and "LIBSSH2_PREFIX" in message
    assert "libssh2-1-dev" in message and "pkg-config" in message


def test_pip_install_fails_with_that_message(tmp_path):
    # As a user meets it: pip builds the checkout (setuptools from pyproject's
    # build requirements) on a machine with no apt-get and no pkg-config. A copy of it:
    # the build writes build/ and pssh2.egg-info into the tree it builds, which must
    # not be the checkout (it may be read-only; it is not the build's to fill).
    source = copy_source(tmp_path / "source")
    env = dict(os.environ, PATH=str(tmp_path), LIBSSH2_BUNDLE="1",
               LIBSSH2_BUILD_DIR=str(tmp_path / "scratch"))
    env.pop("LIBSSH2_PREFIX", None)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w",
                           str(tmp_path / "wheels"), str(source)],
                          env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "error: libssh2 >= 1.11 was not found" in output
    assert "LIBSSH2_PREFIX" in output
    assert not list((tmp_path / "wheels").glob("*.whl"))


def _prefix(tmp_path, stamp):
    (tmp_path / "include").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "include" / "libssh2.h").write_text('#define LIBSSH2_VERSION "1.11.1"\n')
    if stamp is not None:
        (tmp_path / "patches.sha256").write_text(stamp)
    return str(tmp_path)


def test_a_prefix_with_our_patches_counts_as_patched(tmp_path):
    info = libssh2._from_prefix(_prefix(tmp_path, libssh2._patches_digest()))
    assert (info.version, info.patched) == ("1.11.1", True)


@pytest.mark.parametrize("stamp", [None, "an older set of patches"])
def test_any_other_prefix_is_built_against_as_unpatched_and_says_so(tmp_path, monkeypatch,
                                                                    capfd, stamp):
    monkeypatch.setenv("LIBSSH2_PREFIX", _prefix(tmp_path, stamp))
    info = libssh2.locate(str(tmp_path / "scratch"))
    assert info.patched is False
    err = capfd.readouterr().err
    assert "WARNING: libssh2 1.11.1 is unpatched" in err
    assert "no OpenSSH host certificates" in err and "PATCHED_LIBSSH2 is False" in err


def test_the_installed_bindings_are_patched():
    import ssh2.session
    assert ssh2.session.PATCHED_LIBSSH2 is True


def test_the_checkout_is_not_on_the_import_path():
    assert REPO not in [os.path.abspath(p) for p in sys.path if p]


def test_one_version_for_the_package_the_bindings_and_the_command_line():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        project = tomllib.load(fh)
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ssh2.__version__"}
    assert importlib.metadata.version("pssh2") == ssh2.__version__
    pssh = os.path.join(os.path.dirname(sys.executable), "pssh")
    done = subprocess.run([pssh, "--version"], capture_output=True, text=True, timeout=60,
                          cwd="/", check=True)
    assert done.stdout.startswith(f"pssh {ssh2.__version__} (libssh2 1.11")
    assert done.stdout.rstrip().endswith(", patched)")


def test_the_license_is_an_spdx_expression():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        assert tomllib.load(fh)["project"]["license"] == "LGPL-2.1-or-later"
    assert importlib.metadata.metadata("pssh2")["License-Expression"] == "LGPL-2.1-or-later"
