"""cffi build script (API, out-of-line): compiles core_c/src/*.c into the extension core_c._core.

Run by setuptools through ``cffi_modules`` in setup.py during ``pip install``. Paths are relative
to the project root, which is the working directory of the build.

The cffi declarations are generated here from the public C headers, so they cannot drift from
what the library declares. Every header in core_c/include/ is listed below as public or internal
(an unlisted header fails the build):

- public (the Python-facing surface; in dependency order, a header after those whose types it
  uses): their ``#define NAME <integer>`` lines, typedefs, structs and prototypes become the cdef;
- internal (C-only helpers: containers, text and JSON lexing, trace row rules): never declared to
  cffi;
- ``litehit.h``: the umbrella the extension compiles against; it includes every public header.

A public header holds declarations only: no function-like or non-integer macros and no
conditional compilation beyond its include guard and ``#if defined(__GNUC__)`` attributes
(``cdef_from_headers`` rejects anything else rather than guess).
"""

from __future__ import annotations

import os
import platform
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
INCLUDE = HERE / "include"

PUBLIC_HEADERS = (
    "lh_common.h",
    "lh_prefix_hash.h",
    "lh_normalize.h",
    "lh_lane.h",
    "lh_hybrid.h",
    "lh_project.h",
    "lh_policy.h",
    "lh_route.h",
    "lh_profile.h",
    "lh_evidence.h",
    "lh_trace_format.h",
    "lh_trace_scan.h",
    "lh_facts.h",
    "lh_query.h",
    "lh_tiers.h",
)
INTERNAL_HEADERS = (
    "lh_batch.h",
    "lh_buf.h",
    "lh_hash.h",
    "lh_json.h",
    "lh_keymap.h",
    "lh_policy_ops.h",
    "lh_prefault.h",
    "lh_text.h",
    "lh_trace_row.h",
)
UMBRELLA_HEADER = "litehit.h"

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
_DEFINE = re.compile(r"#\s*define\s+(\w+)(\(.*)?(?:\s+(.*))?$")
_INTEGER = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*$")
_STATIC_INLINE = re.compile(r"\bstatic\s+inline\b")


def _drop_static_inline(text: str) -> str:
    """Removes every ``static inline`` function (a declaration through its ';', a definition
    through the brace closing its body)."""
    out = []
    pos = 0
    for match in _STATIC_INLINE.finditer(text):
        if match.start() < pos:
            continue
        out.append(text[pos : match.start()])
        body, semicolon = text.find("{", match.end()), text.find(";", match.end())
        if body < 0 or 0 <= semicolon < body:
            pos = semicolon + 1
            continue
        depth, i = 0, body
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        pos = i
    out.append(text[pos:])
    return "".join(out)


def cdef_from_header(text: str, name: str = "<header>") -> str:
    """The cffi declarations of one public header's text (see the module docstring)."""
    text = _COMMENT.sub(" ", text.replace("\\\n", " "))
    text = _drop_static_inline(_ATTRIBUTE.sub(" ", text))
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("#"):
            if line:
                lines.append(raw.rstrip())
            continue
        directive = line[1:].split(maxsplit=1)[0] if line[1:].strip() else ""
        if directive in {"include", "ifndef", "endif"} or line.replace(" ", "") == "#ifdefined(__GNUC__)":
            continue
        define = _DEFINE.match(line) if directive == "define" else None
        if define is None:
            raise ValueError(f"{name}: unsupported preprocessor line in a public header: {line}")
        macro, params, value = define.groups()
        if params is not None or (value is not None and not _INTEGER.match(value.strip())):
            raise ValueError(f"{name}: a public header may only #define integers: {line}")
        if value is not None:  # a bare #define is the include guard
            lines.append(f"#define {macro} {value.strip()}")
    return "\n".join(lines)


def cdef_from_headers(headers: Iterable[tuple[str, str]]) -> str:
    """The cdef of (name, text) public headers, in order."""
    return "\n".join(f"/* {name} */\n{cdef_from_header(text, name)}" for name, text in headers)


def _check_header_lists() -> None:
    listed = {*PUBLIC_HEADERS, *INTERNAL_HEADERS, UMBRELLA_HEADER}
    unlisted = sorted(p.name for p in INCLUDE.glob("*.h") if p.name not in listed)
    if unlisted:
        raise RuntimeError(f"core_c/include headers not listed as public or internal in build_ffi.py: {unlisted}")


def public_cdef() -> str:
    """The cdef of the library, generated from the public headers on disk."""
    _check_header_lists()
    return cdef_from_headers((name, (INCLUDE / name).read_text()) for name in PUBLIC_HEADERS)


def _relative(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in sorted(paths)]


def _compile_args() -> list[str]:
    """The C flags: LITEHIT_CFLAGS when set (all of them, nothing added), else the defaults below,
    with warnings as errors when CI=true."""
    override = os.environ.get("LITEHIT_CFLAGS")
    if override is not None:
        return shlex.split(override)
    # -ffp-contract=off: no fused multiply-add, so floating-point results (the WA policy) are the
    # same on every compiler and match the reference arithmetic
    args = ["-std=c99", "-O3", "-DNDEBUG", "-fno-strict-aliasing", "-ffp-contract=off", "-Wall", "-Wextra"]
    if os.environ.get("CI") == "true":
        args.append("-Werror")  # CI builds with warnings as errors (the sanitized C tests always do)
    if platform.machine().lower() in {"x86_64", "amd64"}:
        args.append("-mpopcnt")  # every x86-64 CPU since 2008; the rank structure counts bits
    return args


ffibuilder = FFI()
ffibuilder.cdef(public_cdef())
ffibuilder.set_source(
    "core_c._core",
    f'#include "{UMBRELLA_HEADER}"',
    sources=_relative(list((HERE / "src").glob("*.c"))),
    include_dirs=[str(INCLUDE.relative_to(ROOT))],
    depends=_relative(list(INCLUDE.glob("*.h"))),
    extra_compile_args=_compile_args(),
    libraries=["m", "pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
