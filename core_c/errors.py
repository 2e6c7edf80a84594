"""Exceptions raised by the C core binding.

Every C status code maps to exactly one exception class; all carry the C message::

    CoreError                         base: .status (int), .status_name (str), .message (str)
    +-- CoreMemoryError               LH_ENOMEM  (also a MemoryError)
    +-- CoreInvalidArgument           LH_EINVAL  (also a ValueError)
    +-- CoreRangeError                LH_ERANGE  (also an OverflowError)
    +-- CoreParseError                LH_EPARSE  (also a ValueError)

Batch calls attach ``index``: the position of the failing item; items before it were applied.
"""

from __future__ import annotations

from core_c._core import ffi, lib

__all__ = [
    "STATUS_ERRORS",
    "CoreError",
    "CoreInvalidArgument",
    "CoreMemoryError",
    "CoreParseError",
    "CoreRangeError",
    "parse_error_message",
    "raise_for_status",
]


class CoreError(Exception):
    """A C core call failed; ``status`` is the LH_* code and ``message`` the C text."""

    def __init__(self, status: int, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.index = index

    @property
    def status_name(self) -> str:
        name: bytes = ffi.string(lib.lh_status_name(self.status))
        return name.decode()


class CoreMemoryError(CoreError, MemoryError):
    """The C core could not allocate memory; the object it worked on is unchanged."""


class CoreInvalidArgument(CoreError, ValueError):
    """An argument or request violates the core's contract (e.g. the length contract)."""


class CoreRangeError(CoreError, OverflowError):
    """A position, count or number does not fit its representation."""


class CoreParseError(CoreError, ValueError):
    """The C core was given malformed text."""


STATUS_ERRORS: dict[int, type[CoreError]] = {
    lib.LH_ENOMEM: CoreMemoryError,
    lib.LH_EINVAL: CoreInvalidArgument,
    lib.LH_ERANGE: CoreRangeError,
    lib.LH_EPARSE: CoreParseError,
}


def raise_for_status(status: int, err: object, *, index: int | None = None, partial: object = None) -> None:
    """Raises the exception for a non-zero status, reading the message from the err buffer. A
    batch call passes ``partial``, the outputs of the requests before the failing one (committed):
    the exception carries it as ``partial``."""
    if status == lib.LH_OK:
        return
    message = ffi.string(err).decode("utf-8", "replace")
    cls = STATUS_ERRORS.get(status, CoreError)
    exc = cls(status, message, index=index)
    if partial is not None:
        exc.partial = partial  # type: ignore[attr-defined]
    raise exc


def parse_error_message(status: int, err: object) -> str:
    """For calls that stop at malformed text: "" for LH_OK, the C message for LH_EPARSE (the
    caller reports it with the failing line); any other status raises as raise_for_status."""
    if status == lib.LH_OK:
        return ""
    if status != lib.LH_EPARSE:
        raise_for_status(status, err)
    message: str = ffi.string(err).decode("utf-8", "replace")
    return message


def new_error_buffer() -> object:
    """A fresh caller-owned error buffer for one C call."""
    return ffi.new("char[]", lib.LH_ERR_LEN)
