"""cffi build script (API, out-of-line): compiles core_c/src/*.c into the extension core_c._core.

Run by setuptools through ``cffi_modules`` in setup.py during ``pip install``. Paths are relative
to the project root, which is the working directory of the build.
"""

from __future__ import annotations

import os
import platform
import shlex
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _relative(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in sorted(paths)]


def _compile_args() -> list[str]:
    override = os.environ.get("LITEHIT_CFLAGS")
    if override is not None:
        return shlex.split(override)
    args = ["-std=c99", "-O3", "-DNDEBUG", "-fno-strict-aliasing"]
    if platform.machine().lower() in {"x86_64", "amd64"}:
        args.append("-mpopcnt")  # every x86-64 CPU since 2008; the rank structure counts bits
    return args


ffibuilder = FFI()
ffibuilder.cdef((HERE / "litehit.cdef.h").read_text())
ffibuilder.set_source(
    "core_c._core",
    '#include "litehit.h"',
    sources=_relative(list((HERE / "src").glob("*.c"))),
    include_dirs=[str((HERE / "include").relative_to(ROOT))],
    depends=_relative(list((HERE / "include").glob("*.h"))),
    extra_compile_args=_compile_args(),
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
