"""The lifecycle every Python object owning C state shares: a pointer released exactly once (by
close(), by leaving a ``with`` block, or at the latest when the object is garbage collected)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

__all__ = ["CHandle"]


class CHandle:
    """Owns one C object; subclasses call ``_own(ptr, destroy)`` once it is created."""

    _ptr: Any = None

    def _own(self, ptr: Any, destroy: Callable[[Any], None]) -> None:
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, destroy, ptr)

    def close(self) -> None:
        """Releases the C state now. Idempotent; the object is unusable afterwards."""
        self._finalizer()
        self._ptr = None

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _handle(self) -> Any:
        if self._ptr is None:
            raise ValueError(f"operation on a closed {type(self).__name__}")
        return self._ptr
