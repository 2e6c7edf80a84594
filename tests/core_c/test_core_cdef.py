"""The cffi declarations are generated from the public C headers (core_c/build_ffi.py).

These tests read the headers independently of the generator (pycparser on the raw text) and
compare every public prototype, struct, enum and integer #define with what the compiled module
core_c._core exposes: a header the generator mis-read, a declaration it dropped, or a stale build
would show up as a difference. The checker itself is tested on mutated header text, so a drift
cannot pass unnoticed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from core_c._core import ffi, lib
from pycparser import c_ast, c_parser

from core_c import build_ffi

INCLUDE = Path(build_ffi.__file__).resolve().parent / "include"

# Stand-ins for the libc types the headers use; pycparser keeps the typedef names as written.
_PRELUDE = "".join(
    f"typedef int {name};"
    for name in ("size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t")
)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_INT_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+(-?(?:0[xX][0-9a-fA-F]+|\d+))[uUlL]*\s*$", re.MULTILINE)
_SPELLING = {"unsigned": "unsigned int", "signed": "int", "long int": "long", "unsigned long int": "unsigned long"}

Signature = tuple[str, tuple[str, ...], bool]  # result, parameters, variadic


@dataclass
class Api:
    """Declarations by name, with types spelled as cffi spells them (no const, struct X)."""

    functions: dict[str, Signature] = field(default_factory=dict)
    structs: dict[str, tuple[tuple[str, str], ...] | None] = field(default_factory=dict)  # None: opaque
    constants: dict[str, int] = field(default_factory=dict)  # integer #defines and enumerators


def _declarations(text: str) -> str:
    """Header text pycparser can read: no comments, no preprocessor lines, no conditional code."""
    lines, depth = [], 0
    for line in _COMMENT.sub(" ", text.replace("\\\n", " ")).splitlines():
        directive = line.strip()
        if directive.startswith("#if") and not directive.startswith("#ifndef"):
            depth += 1  # conditional code (only attributes in public headers) is not a declaration
        elif directive.startswith("#endif") and depth:
            depth -= 1
        elif not directive.startswith("#") and not depth:
            lines.append(line)
    return "\n".join(lines)


def _spell(node: Any, struct_typedefs: dict[str, str]) -> str:
    if isinstance(node, c_ast.PtrDecl):
        return f"{_spell(node.type, struct_typedefs)} *"
    if isinstance(node, c_ast.ArrayDecl):
        return f"{_spell(node.type, struct_typedefs)}[{node.dim.value if node.dim else ''}]"
    if isinstance(node, c_ast.TypeDecl):
        return _spell(node.type, struct_typedefs)
    if isinstance(node, c_ast.Struct):
        return f"struct {node.name}"
    if isinstance(node, c_ast.IdentifierType):
        name = " ".join(node.names)
        if name in struct_typedefs:
            return f"struct {struct_typedefs[name]}"
        return _SPELLING.get(name, name)
    raise TypeError(f"unsupported type in a public header: {type(node).__name__}")


def _signature(decl: Any, struct_typedefs: dict[str, str]) -> Signature:
    params: list[str] = []
    variadic = False
    for param in decl.type.args.params if decl.type.args else []:
        if isinstance(param, c_ast.EllipsisParam):
            variadic = True
            continue
        spelled = _spell(param.type, struct_typedefs)
        if spelled != "void":
            params.append(spelled)
    return _spell(decl.type.type, struct_typedefs), tuple(params), variadic


def header_api(text: str) -> Api:
    """The public declarations of C header text (several headers may be concatenated)."""
    api = Api(constants={name: int(value, 0) for name, value in _INT_DEFINE.findall(_COMMENT.sub(" ", text))})
    ast = c_parser.CParser().parse(_PRELUDE + _declarations(text))
    struct_typedefs: dict[str, str] = {}
    for node in ast.ext:
        if isinstance(node, c_ast.Typedef) and isinstance(node.type.type, c_ast.Struct):
            struct = node.type.type
            struct_typedefs[node.name] = struct.name or node.name
            members = None
            if struct.decls is not None:
                members = tuple((d.name, _spell(d.type, struct_typedefs)) for d in struct.decls)
            if members is not None or node.name not in api.structs:
                api.structs[node.name] = members
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
            if "static" not in node.storage:
                api.functions[node.name] = _signature(node, struct_typedefs)
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.Enum):
            value = -1
            for item in node.type.values.enumerators:
                value = int(item.value.value, 0) if item.value is not None else value + 1
                api.constants[item.name] = value
    return api


def module_api(names: Api) -> Api:
    """What the compiled module declares for the names in ``names`` (absent names are left out)."""
    api = Api()
    for name in names.functions:
        if hasattr(lib, name):
            ctype = ffi.typeof(getattr(lib, name))
            api.functions[name] = (ctype.result.cname, tuple(a.cname for a in ctype.args), bool(ctype.ellipsis))
    for name in names.structs:
        try:
            ctype = ffi.typeof(name)
        except ffi.error:
            continue
        try:
            ffi.sizeof(ctype)  # lays the struct out (cffi builds its fields lazily)
        except ffi.error:
            api.structs[name] = None  # opaque
            continue
        api.structs[name] = tuple((n, f.type.cname) for n, f in ctype.fields)
    for name in names.constants:
        if hasattr(lib, name):
            api.constants[name] = int(getattr(lib, name))
    return api


def api_differences(header: Api, module: Api) -> list[str]:
    """Every declaration of the headers that the module lacks or declares otherwise."""
    problems = []
    for kind in ("functions", "structs", "constants"):
        want, have = getattr(header, kind), getattr(module, kind)
        for name, declared in want.items():
            if name not in have:
                problems.append(f"{kind[:-1]} {name}: in the headers, missing from core_c._core")
            elif have[name] != declared:
                problems.append(f"{kind[:-1]} {name}: headers say {declared}, core_c._core says {have[name]}")
    return problems


def _public_text() -> str:
    return "\n".join((INCLUDE / name).read_text() for name in build_ffi.PUBLIC_HEADERS)


def _internal_text() -> str:
    return "\n".join((INCLUDE / name).read_text() for name in build_ffi.INTERNAL_HEADERS)


# ---- the real headers against the real module ---------------------------------------------


def test_every_public_declaration_matches_the_module() -> None:
    header = header_api(_public_text())
    # a second, cruder reading: every line that starts a prototype of an lh_ function
    prototypes = re.findall(r"^[A-Za-z_][\w \t*]*?\b(lh_\w+)\s*\(", _COMMENT.sub(" ", _public_text()), re.MULTILINE)
    assert "lh_trace_format_get" in prototypes and sorted(header.functions) == sorted(set(prototypes))
    assert api_differences(header, module_api(header)) == []


def test_the_module_declares_only_the_public_headers() -> None:
    header = header_api(_public_text())
    public = {*header.functions, *header.constants}
    assert sorted(name for name in dir(lib) if name not in public) == []


def test_internal_declarations_stay_out_of_the_module() -> None:
    internal = re.findall(r"\b(lh_\w+)\s*\(", _COMMENT.sub(" ", _internal_text()))
    assert internal, "the internal headers declare functions"
    assert sorted({name for name in internal if hasattr(lib, name)}) == []


def test_every_header_is_classified_and_the_umbrella_includes_the_public_ones() -> None:
    classified = {*build_ffi.PUBLIC_HEADERS, *build_ffi.INTERNAL_HEADERS, build_ffi.UMBRELLA_HEADER}
    assert sorted(p.name for p in INCLUDE.glob("*.h")) == sorted(classified)
    assert not set(build_ffi.PUBLIC_HEADERS) & set(build_ffi.INTERNAL_HEADERS)
    umbrella = re.findall(r'#include "([^"]+)"', (INCLUDE / build_ffi.UMBRELLA_HEADER).read_text())
    assert sorted(umbrella) == sorted(build_ffi.PUBLIC_HEADERS)
    for name in build_ffi.PUBLIC_HEADERS:  # a public header must not pull internal types in
        included = re.findall(r'#include "([^"]+)"', (INCLUDE / name).read_text())
        assert set(included) <= set(build_ffi.PUBLIC_HEADERS), name


def test_the_generated_cdef_declares_what_the_headers_declare() -> None:
    header = header_api(_public_text())
    generated = header_api(build_ffi.public_cdef())
    assert generated == header


# ---- the checker catches drift ------------------------------------------------------------

SCAN_H = (INCLUDE / "lh_trace_scan.h").read_text()
FORMAT_H = (INCLUDE / "lh_trace_format.h").read_text()
COMMON_H = (INCLUDE / "lh_common.h").read_text()


def _drift(text: str, old: str, new: str) -> list[str]:
    assert old in text
    header = header_api(text.replace(old, new))
    return api_differences(header, module_api(header))


@pytest.mark.parametrize(
    ("text", "old", "new", "reported"),
    [
        (SCAN_H, "first_line, int64_t trace_block_size", "first_line, int trace_block_size", "lh_scan_chunk"),
        (SCAN_H, "void lh_scan_destroy(lh_scan *scan)", "int lh_scan_destroy(lh_scan *scan)", "lh_scan_destroy"),
        (SCAN_H, "lh_scan **out, char *err", "lh_scan **out, int flags, char *err", "lh_scan_create"),
        (SCAN_H, "size_t n_keys;", "int64_t n_keys;", "lh_scan_result"),
        (SCAN_H, "size_t lines; ", "size_t lines_read; ", "lh_scan_result"),
        (SCAN_H, "#define LH_ROW_WRITE 2", "#define LH_ROW_WRITE 3", "LH_ROW_WRITE"),
        (FORMAT_H, "int detect_priority;", "int64_t detect_priority;", "lh_trace_format_info"),
        (FORMAT_H, "size_t lh_trace_format_count(void);", "size_t lh_trace_format_count(int all);", "count"),
        (FORMAT_H, "#endif", "size_t lh_trace_format_detect(const char *keys);\n#endif", "lh_trace_format_detect"),
        (FORMAT_H, "#endif", "enum { LH_FMT_VLLM = 5 };\n#endif", "LH_FMT_VLLM"),
        (COMMON_H, "const char *fmt, ...)", "const char *fmt)", "lh_fail"),
    ],
)
def test_a_changed_header_is_reported(text: str, old: str, new: str, reported: str) -> None:
    problems = _drift(text, old, new)
    assert len(problems) == 1 and reported in problems[0], problems


def test_an_unchanged_header_is_not_reported() -> None:
    for text in (SCAN_H, FORMAT_H, COMMON_H):
        header = header_api(text)
        assert api_differences(header, module_api(header)) == []


def test_a_declaration_dropped_by_the_generator_is_reported() -> None:
    generated = header_api(build_ffi.cdef_from_header(SCAN_H.replace("void lh_scan_destroy(lh_scan *scan);", "")))
    assert generated != header_api(SCAN_H)
    assert set(header_api(SCAN_H).functions) - set(generated.functions) == {"lh_scan_destroy"}


# ---- the generator's rules ----------------------------------------------------------------


def test_the_generator_keeps_declarations_and_integer_defines_only() -> None:
    text = """/* x.h - a header */
#ifndef X_H
#define X_H
#include <stdint.h>
#define X_LIMIT 0x10u /* a limit */
typedef struct x x; // opaque
int x_do(x *h, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static inline int x_twice(int v) { return 2 * v; }
static inline int x_half(int v);
#endif
"""
    cdef = build_ffi.cdef_from_header(text, "x.h")
    assert cdef.split("\n") == [
        "#define X_LIMIT 0x10u",
        "typedef struct x x;",
        "int x_do(x *h, const char *fmt, ...)",
        "    ;",
    ]


@pytest.mark.parametrize(
    "line",
    ["#define X_MAX(a, b) ((a) > (b) ? (a) : (b))", '#define X_NAME "x"', "#if X_LIMIT > 4", "#else", "#pragma once"],
)
def test_the_generator_rejects_what_cffi_would_misread(line: str) -> None:
    with pytest.raises(ValueError, match=r"x\.h"):
        build_ffi.cdef_from_header(f"int x(void);\n{line}\n", "x.h")
