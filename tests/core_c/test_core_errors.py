"""Every C status code has its Python exception, carrying the C message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from core_c._core import lib

import core_c
from core_c.errors import STATUS_ERRORS, CoreError, raise_for_status

HEADER = Path(core_c.__file__).parent / "include" / "lh_common.h"


def header_statuses() -> dict[str, int]:
    found = re.findall(r"#define (LH_E[A-Z]+) (\d+)", HEADER.read_text())
    return {name: int(value) for name, value in found}


def test_every_status_in_the_header_maps_to_its_own_exception() -> None:
    statuses = header_statuses()
    assert statuses, "no status codes found in lh_common.h"
    assert len(statuses) + 1 == lib.LH_STATUS_COUNT
    classes = set()
    for name, value in statuses.items():
        cls = STATUS_ERRORS[value]
        assert issubclass(cls, CoreError)
        classes.add(cls)
        err = core_c.errors.new_error_buffer()
        with pytest.raises(cls) as info:
            raise_for_status(value, _fill(err, f"boom {name}"))
        assert info.value.message == f"boom {name}"
        assert info.value.status == value
        assert info.value.status_name == name
    assert len(classes) == len(statuses)


def _fill(err: object, text: str) -> object:
    from core_c._core import ffi

    data = text.encode()
    ffi.memmove(err, data + b"\0", len(data) + 1)
    return err


def test_python_exception_families() -> None:
    assert issubclass(core_c.CoreMemoryError, MemoryError)
    assert issubclass(core_c.CoreInvalidArgument, ValueError)
    assert issubclass(core_c.CoreRangeError, OverflowError)
    assert issubclass(core_c.CoreParseError, ValueError)


def test_real_c_failures_raise_the_mapped_exception() -> None:
    with pytest.raises(core_c.CoreInvalidArgument, match="NormalizeRequest"):
        core_c.normalize([1, 2], 4, 4)
    with pytest.raises(core_c.CoreInvalidArgument, match="ttl_ns"):
        core_c.Lane(ttl_ns=-5)
