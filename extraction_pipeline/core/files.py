"""Files users pick up are never half-written, and what a killed writer leaves is swept.

A writer writes ``.<name>.<host>.<pid>.partial`` beside the target, flushes it to disk and renames
it over the target (atomic on one file system): a reader sees the previous file or the new one,
never part of one, even when the writer is SIGKILLed. What a killed writer leaves behind is a
hidden partial file naming its host and process, so a later writer on the same host removes those
whose process is gone (another host's, or a live process's, are left alone: a shared folder may
serve several machines). A temporary folder of ours (an upload being staged) is hidden and marked
``.extraction-<what>.<host>.<pid>.``: only names of that exact shape are ever removed, so a user's
file or folder beside the workbooks is never taken for one.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

from extraction_pipeline.core.runs.liveness import worker_alive

PARTIAL_SUFFIX = ".partial"
_PARTIAL = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^./]+)\.(?P<pid>\d+)\.partial$")


def host_tag() -> str:
    """This machine's name as the files its processes leave carry it."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:60] or "host"


def partial_path(target: Path) -> Path:
    """Where this process writes ``target`` before renaming it into place."""
    return target.with_name(f".{target.name}.{host_tag()}.{os.getpid()}{PARTIAL_SUFFIX}")


def owner_gone(name: str) -> bool:
    """Whether a file or folder named by ``partial_path``/``owned_name`` belongs to a process of
    this host that no longer exists."""
    match = _PARTIAL.match(name) or _OWNED.match(name)
    if match is None:
        return False
    return match["host"] == host_tag() and not worker_alive(int(match["pid"]))


def remove_stale_partials(folder: Path) -> list[Path]:
    """Remove the partial files and owned folders in ``folder`` whose writer on this host is gone."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        if not owner_gone(entry.name):
            continue
        path = Path(entry.path)
        with contextlib.suppress(FileNotFoundError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
    return removed


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """Yield the partial path to write; on success it is flushed to disk and renamed over
    ``target``; on any failure (or interruption) it is removed and ``target`` is untouched."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(target.parent)
    tmp = partial_path(target)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # left by an earlier process that had our pid
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, target)
        _fsync_folder(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _fsync(path: Path) -> None:
    # Without it a machine that loses power right after the rename can show a zero-length file.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be synced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# Hidden, and marked as ours: a user's folder named like "backup-<host>-2024-final" is never one.
_OWNED = re.compile(r"^\.extraction-(?P<prefix>[a-z]+)\.(?P<host>[^./]+)\.(?P<pid>\d+)\.[A-Za-z0-9_]+$")


def owned_name(prefix: str) -> str:
    """A prefix for a temporary folder that ``remove_stale_partials`` removes once this process is
    gone (``tempfile.mkdtemp(prefix=owned_name("upload"))``): hidden, and marked as ours."""
    return f".extraction-{prefix}.{host_tag()}.{os.getpid()}."
