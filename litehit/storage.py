"""Shared storage: where uploads and job outputs live, and the one gate for user paths.

Layout under the storage root::

    uploads/<trace_id>/<file name>
    uploads/<trace_id>/<file name>.part   an upload being received (flock-ed by its writer)
    jobs/<job_id>/work/         stage files of a replay (removed when the job ends)
    jobs/<job_id>/out/          litehit_facts.csv; policies.json, policies.png; window.json, window.png;
                                profile.json, plots/<name>.png|svg
    jobs/<job_id>/query/        requests.jsonl, curve.json, hit_rate.png, report.html
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from pathlib import Path, PurePosixPath

from litehit.errors import StorageError

__all__ = [
    "CURVE_FILE",
    "PART_SUFFIX",
    "PLOT_FILE",
    "PROFILE_PLOT_DIR",
    "PROFILE_RESULT_FILE",
    "REPORT_FILE",
    "REQUESTS_FILE",
    "SWEEP_PLOT_FILE",
    "SWEEP_RESULT_FILE",
    "WINDOW_PLOT_FILE",
    "WINDOW_RESULT_FILE",
    "Storage",
]

PART_SUFFIX = ".part"  # an upload being received; renamed to its final name once complete
REQUESTS_FILE = "requests.jsonl"  # in a query job's directory
CURVE_FILE = "curve.json"
PLOT_FILE = "hit_rate.png"
REPORT_FILE = "report.html"  # the `litehit report` page of a query job
SWEEP_RESULT_FILE = "policies.json"  # a policy sweep's result (the CLI's -o bytes)
SWEEP_PLOT_FILE = "policies.png"
WINDOW_RESULT_FILE = "window.json"  # a window sizing's result (the CLI's -o bytes)
WINDOW_PLOT_FILE = "window.png"
PROFILE_RESULT_FILE = "profile.json"  # a workload profile's result (the CLI's -o bytes)
PROFILE_PLOT_DIR = "plots"  # its pictures, <name>.png and <name>.svg


class Storage:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def ensure(self) -> None:
        for sub in ("uploads", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def user_path(self, text: str, *, must_exist: bool = True) -> Path:
        """A path a user gave (relative to the root, or absolute inside it). Rejects '..' that
        escapes, absolute paths elsewhere and symlinks whose target leaves the root."""
        if not text or "\x00" in text:
            raise StorageError("the path is empty or contains a NUL byte")
        candidate = Path(text)
        if not candidate.is_absolute():
            if any(part == ".." for part in PurePosixPath(text).parts):
                raise StorageError(f"path {text!r} must not contain '..'")
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()  # follows every symlink
            if resolved != self.root and self.root not in resolved.parents:
                raise StorageError(f"path {text!r} is outside the storage root")
            if must_exist and not resolved.is_file():
                raise StorageError(f"path {text!r} is not a file in the storage root")
        except OSError as exc:  # a name too long, a symlink loop, no permission...
            raise StorageError(f"path {text!r} cannot be used: {exc.strerror or exc}") from None
        return resolved

    def relative(self, path: Path) -> str:
        return str(Path(path).resolve().relative_to(self.root))

    def absolute(self, relative: str) -> Path:
        return self.user_path(relative, must_exist=False)

    def upload_dir(self, trace_id: str) -> Path:
        return self.root / "uploads" / trace_id

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def work_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "work"

    def out_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "out"

    def query_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "query"

    def remove_work(self, job_id: str) -> None:
        shutil.rmtree(self.work_dir(job_id), ignore_errors=True)

    def remove_orphan_parts(self, grace_s: float) -> list[str]:
        """Removes unfinished uploads left by a killed API: ``uploads/*/*.part`` files not
        written to for grace_s seconds and not locked by their writer (an upload in progress
        holds an flock on its file), then their upload folders if empty. Returns the removed
        files, relative to the root."""
        removed: list[str] = []
        cutoff = time.time() - grace_s
        for part in sorted((self.root / "uploads").glob(f"*/*{PART_SUFFIX}")):
            try:
                with part.open("rb") as f:
                    if os.fstat(f.fileno()).st_mtime > cutoff:
                        continue
                    try:
                        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:  # an upload in progress is writing it
                        continue
                    part.unlink()
            except OSError:  # gone meanwhile, or unreadable: next sweep
                continue
            removed.append(self.relative(part.parent) + "/" + part.name)
            with contextlib.suppress(OSError):  # not empty: a finished upload lives there too
                part.parent.rmdir()
        return removed

    @staticmethod
    def lock_part(file: int) -> None:
        """Marks an open ``.part`` file as written by an upload in progress (until closed)."""
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)

    @staticmethod
    def safe_name(name: str) -> str:
        """A file name for an upload: the base name only, no path tricks, bounded length."""
        base = os.path.basename(name.replace("\\", "/")).strip().lstrip(".")
        cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in base)[:128]
        return cleaned or "trace"
