#!/bin/sh
# Build the libssh2 that the wheels carry: run by ci/wheels.sh INSIDE the old
# Debian root, so that it needs no newer glibc than that root's.
#   wheel_libssh2.sh SOURCES PREFIX
# SOURCES has src-openssl and src-libssh2 (Debian's source packages, libssh2
# with build_support/patches applied) and patches.sha256; PREFIX gets
# include/, lib/libssh2.so* and patches.sha256 (which marks it as patched).
#
# OpenSSL is linked into libssh2.so statically and its symbols are not exported
# (--exclude-libs): the wheel then works whatever OpenSSL the host has (1.1, 3.x
# or none) and never mixes its calls with another copy of OpenSSL in the same
# process (Python's ssl module, cryptography). zlib stays a shared library:
# libz.so.1 is on every Linux and on manylinux's list of libraries a wheel may
# expect from the host.
set -eu
sources=$1
prefix=$2
openssl_prefix=$sources/openssl-static
jobs=${JOBS:-2}

cd "$sources/src-openssl"
# openssldir: the configuration file this OpenSSL reads by default. A private
# path, so that it never loads the host's openssl.cnf (written for the host's
# OpenSSL, possibly naming engines or providers of another version).
# OPENSSL_CONF still points it at a file.
# The no-* options leave out what libssh2 never calls (certificate, PKI and TLS
# extras, post-quantum signatures and KEMs, national ciphers, the legacy provider,
# which libssh2 never loads): a shorter build. -O2 rather than OpenSSL's -O3: the
# ciphers, hashes and big-number code libssh2 spends its time in are assembly either
# way, and the build is a fifth shorter.
./Configure linux-x86_64 no-shared no-tests no-docs no-engine no-legacy -fPIC -O2 \
    no-argon2 no-aria no-camellia no-cmp no-cms no-comp no-ct no-dtls no-http no-idea \
    no-mdc2 no-ml-dsa no-ml-kem no-ocsp no-quic no-rfc3779 no-seed no-siphash no-siv \
    no-slh-dsa no-sm2 no-sm3 no-sm4 no-srp no-srtp no-ts no-whirlpool \
    --prefix="$openssl_prefix" --libdir=lib --openssldir=/usr/local/lib/pssh2-openssl \
    >"$sources/openssl-configure.log" 2>&1
make -j"$jobs" build_libs >"$sources/openssl-build.log" 2>&1
make install_dev >>"$sources/openssl-build.log" 2>&1

cd "$sources/src-libssh2"
./configure --prefix="$prefix" --libdir="$prefix/lib" --with-crypto=openssl \
    --with-libssl-prefix="$openssl_prefix" --with-libz --enable-shared --disable-static \
    --disable-examples-build --disable-docker-tests --disable-sshd-tests --disable-debug \
    LIBS="-ldl -pthread" LDFLAGS="-Wl,--exclude-libs,ALL" \
    >"$sources/libssh2-configure.log" 2>&1
make -j"$jobs" -C src >"$sources/libssh2-build.log" 2>&1
make -C src install >>"$sources/libssh2-build.log" 2>&1
mkdir -p "$prefix/include"
cp include/*.h "$prefix/include/"
cp "$sources/patches.sha256" "$prefix/patches.sha256"
