"""The string type of every name, id and path a user sends: a JSON string without NUL bytes (they
reach C strings, file systems and SQL). Its own module so that a facts-reading job kind loads
without the whole config model (litehit.spec)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StrictStr

__all__ = ["Text", "no_nul"]


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL byte")
    return value


Text = Annotated[StrictStr, AfterValidator(no_nul)]
"""A JSON string without NUL bytes: names, ids and paths reach C strings, file systems and SQL."""
