"""Build the ssh2 Cython extensions against libssh2 >= 1.11.

See build_support/libssh2.py for how libssh2 is found or built. Metadata is
in pyproject.toml.
"""
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_support.libssh2 import LibSSH2NotFound, locate

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ["session", "channel", "sftp", "sftp_handle", "knownhost", "agent", "sftp_attributes",
           "listener", "fileinfo", "error_codes", "utils", "publickey", "handle"]


class BuildExt(build_ext):
    """Resolves libssh2 at build time (not at import of setup.py) and ships a
    bundled libssh2 next to the extensions."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = min(2, os.cpu_count() or 1)

    def run(self):
        scratch = os.environ.get("LIBSSH2_BUILD_DIR") or os.path.join(HERE, "build", "libssh2")
        try:
            info = locate(scratch)
        except LibSSH2NotFound as exc:
            sys.exit(f"error: {exc}")
        from Cython.Build import cythonize

        for ext in self.extensions:
            ext.include_dirs[:0] = info.include_dirs
            ext.library_dirs[:0] = info.library_dirs
            ext.libraries[:0] = info.libraries
            if info.patched:
                # Our libssh2 patches are in: e.g. host certificates work.
                ext.define_macros.append(("PSSH2_PATCHED_LIBSSH2", "1"))
            if info.bundle:
                # DT_RPATH (not RUNPATH) so the bundled library wins over an
                # older system libssh2 even when LD_LIBRARY_PATH is set.
                ext.extra_link_args += ["-Wl,-rpath,$ORIGIN", "-Wl,--disable-new-dtags"]
            elif os.environ.get("LIBSSH2_RPATH", "1") != "0":
                # LIBSSH2_RPATH=0 (ci/wheels.sh): no rpath to a path of the build
                # machine; auditwheel gives the wheel's modules one to its own copy.
                ext.runtime_library_dirs += [d for d in info.library_dirs
                                             if d not in ("/usr/lib", "/usr/lib64")]
        # Keep setuptools' finalized Extension objects; take only the C sources.
        compiled = cythonize(
            self.extensions, language_level=3, nthreads=1,
            compiler_directives={"embedsignature": True, "boundscheck": False,
                                 "wraparound": False, "cdivision": True},
            build_dir=os.path.join("build", "cython"))
        for ext, cext in zip(self.extensions, compiled):
            ext.sources = cext.sources
        super().run()
        for lib in info.bundle:
            for dest_dir in {os.path.join(self.build_lib, "ssh2"),
                             os.path.join(HERE, "ssh2") if self.inplace else None} - {None}:
                os.makedirs(dest_dir, exist_ok=True)
                dest = os.path.join(dest_dir, "libssh2.so.1")
                if os.path.realpath(lib) != os.path.realpath(dest):
                    shutil.copyfile(lib, dest)


extensions = [Extension(f"ssh2.{name}", [f"ssh2/{name}.pyx"], include_dirs=[],
                        library_dirs=[], libraries=[], extra_compile_args=["-O2"])
              for name in MODULES]
# The native runner's engine (pssh.runners.native): epoll and the core's waits, no libssh2.
extensions.append(Extension("pssh.runners._native", ["pssh/runners/_native.pyx"],
                            extra_compile_args=["-O2"]))

setup(
    ext_modules=extensions,
    cmdclass={"build_ext": BuildExt},
    package_data={"ssh2": ["*.pyi", "py.typed", "*.pxd", "libssh2.so.1"], "ssh2.c": ["*.pxd"],
                  "pssh": ["py.typed"], "pssh.runners": ["*.pyi"]},
)
