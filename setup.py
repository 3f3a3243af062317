"""Build script: the optional compiled codec and pull scan (docs/performance.md); everything else is in pyproject.toml.

Without a C compiler (or Cython), or with ``SIEVEMQ_BUILD_ACCEL=0``, the install still succeeds and sievemq runs
its pure-Python codecs.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` that reports a failed compile and goes on (the package works without the extension)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all
            print(f"sievemq: the compiled codec was not built ({e}); pure Python it is", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # a compiler that fails
            print(f"sievemq: the compiled codec was not built ({e}); pure Python it is", file=sys.stderr)


def _extensions() -> list[Extension]:
    if os.environ.get("SIEVEMQ_BUILD_ACCEL", "1") == "0":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without Cython: pure Python
        return []
    exts = [
        Extension("sievemq.protocol._codec", ["src/sievemq/protocol/_codec.pyx"]),
        Extension("sievemq.protocol._headers", ["src/sievemq/protocol/_headers.pyx"]),  # frames, header checks
        Extension("sievemq.store._scan", ["src/sievemq/store/_scan.pyx"]),  # the pull scan's loop (store/scan.py)
    ]
    return list(cythonize(exts, compiler_directives={"language_level": "3"}, quiet=True))


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
