"""Atomic publishing: write NAME.tmp in the destination directory, flush, fsync, rename onto
NAME, fsync the directory. Readers never see half a file; on any failure the tmp is removed and
an earlier NAME is left untouched. A lock on the tmp file keeps two writers apart."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self

from litehit.errors import PublishError

__all__ = ["AtomicPublisher", "make_output_dir", "publish_bytes", "storage_reason"]

_STORAGE_REASONS = {
    errno.ENOSPC: "the storage is full",
    errno.EDQUOT: "the storage quota is used up",
    errno.EROFS: "the storage is read-only",
}


def storage_reason(exc: OSError) -> str:
    """Why a write failed, in words: a full or read-only storage says so; else the system's
    reason."""
    return _STORAGE_REASONS.get(exc.errno or 0) or exc.strerror or str(exc)


def make_output_dir(path: str | Path) -> Path:
    """Creates an output directory and its parents if missing; PublishError naming it when it
    cannot be (a file of that name exists, no permission, a read-only or virtual file system)."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PublishError(f"cannot create the output directory {directory}: a file of that name exists") from None
    except OSError as exc:
        raise PublishError(f"cannot create the output directory {directory}: {storage_reason(exc)}") from None
    return directory


class AtomicPublisher:
    """**Usage**::

    with AtomicPublisher(out_dir / "litehit_facts.csv") as pub:
        pub.write(b"...")
        pub.commit()          # without commit(), leaving the block discards the tmp
    """

    def __init__(self, final_path: str | Path) -> None:
        self.final_path = Path(final_path)
        self.tmp_path = self.final_path.with_name(self.final_path.name + ".tmp")
        self._file: BinaryIO | None = None
        self.bytes_written = 0
        self.committed = False

    def __enter__(self) -> Self:
        try:
            fd = os.open(self.tmp_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise PublishError(f"cannot create {self.tmp_path}: {storage_reason(exc)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise PublishError(f"cannot create {self.tmp_path}: another replay is writing it") from None
        os.ftruncate(fd, 0)
        self._file = os.fdopen(fd, "wb", buffering=1 << 20)
        return self

    def write(self, data: bytes | memoryview) -> None:
        assert self._file is not None, "publisher is not open"
        try:
            self._file.write(data)
        except OSError as exc:
            raise PublishError(f"cannot write {self.tmp_path}: {storage_reason(exc)}") from None
        self.bytes_written += len(data)

    def commit(self) -> None:
        """Makes the written bytes visible under the final name, durably."""
        assert self._file is not None, "publisher is not open"
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise PublishError(f"cannot write {self.tmp_path}: {storage_reason(exc)}") from None
        try:
            os.replace(self.tmp_path, self.final_path)
        except OSError as exc:
            raise PublishError(
                f"cannot rename {self.tmp_path.name} to {self.final_path}: {storage_reason(exc)}"
            ) from None
        self.committed = True
        self._close()
        _fsync_dir(self.final_path.parent)

    def _close(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            with contextlib.suppress(OSError):
                file.close()  # also releases the lock

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.committed:
            # Unlink while still holding the lock, so a concurrent writer never loses its file.
            with contextlib.suppress(OSError):
                self.tmp_path.unlink()
        self._close()


def publish_bytes(path: str | Path, data: bytes) -> Path:
    """Writes data to path atomically (tmp, fsync, rename); returns the path."""
    with AtomicPublisher(path) as out:
        out.write(data)
        out.commit()
    return Path(path)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return  # some systems cannot open directories; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
