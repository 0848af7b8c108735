"""Files users pick up are never half-written, and what a killed writer leaves is swept.

A writer writes ``<name>.<host>.<pid>.<mark>.partial`` in a hidden folder of ours beside the target
(``.extraction-partial/``, on the same file system), flushes it to disk and renames it over the
target (atomic on one file system): a reader sees the previous file or the new one, never part of
one, even when the writer is SIGKILLed. What a killed writer leaves behind is a partial file in
that folder naming its host and process, so a later writer on the same host removes those whose
process is gone (another host's, or a live process's, are left alone: a shared folder may serve
several machines). A temporary folder of ours (an upload being staged) is hidden and marked
``.extraction-<what>.<host>.<pid>.``. Only those two are ever removed: a user's file or folder
beside the workbooks, however it is named, is never taken for one of ours.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.runs.liveness import worker_alive

PARTIAL_SUFFIX = ".partial"
PARTIAL_FOLDER = ".extraction-partial"  # where partial files are written: no user puts files there
_PARTIAL = re.compile(r"^(?P<name>.+)\.(?P<host>[^./]+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.partial$")


def host_tag() -> str:
    """This machine's name as the files its processes leave carry it."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:60] or "host"


def partial_path(target: Path) -> Path:
    """Where this writer writes ``target`` before renaming it into place: named after its host and
    process, and its own (two threads writing one target at once never share a partial file)."""
    mark = secrets.token_hex(6)
    return target.parent / PARTIAL_FOLDER / f"{target.name}.{host_tag()}.{os.getpid()}.{mark}{PARTIAL_SUFFIX}"


def _owner_gone(match: re.Match[str] | None) -> bool:
    return match is not None and match["host"] == host_tag() and not worker_alive(int(match["pid"]))


def remove_stale_partials(folder: Path) -> list[Path]:
    """Remove what writers of this host that are gone left for ``folder``: their partial files (in
    its hidden partial folder) and their owned temporary folders (in ``folder``)."""
    removed: list[Path] = []
    for place, pattern in ((folder / PARTIAL_FOLDER, _PARTIAL), (folder, _OWNED)):
        removed += _remove_gone(place, pattern)
    # Emptied now, or left empty by a writer killed between making it and writing in it. A live
    # writer's file in it keeps it; a writer about to write in it makes it again (files._create).
    with contextlib.suppress(OSError):
        (folder / PARTIAL_FOLDER).rmdir()
    return removed


def _remove_gone(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        if not _owner_gone(pattern.match(entry.name)):
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
    """Yield the partial path to write (created empty, so it is ours: write it without O_EXCL); on
    success it is flushed to disk and renamed over ``target``; on any failure (or interruption) it
    is removed and ``target`` is untouched."""
    tmp = partial_path(target)
    remove_stale_partials(target.parent)
    _create(tmp)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, target)
        _fsync_folder(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        with contextlib.suppress(OSError):  # another writer's file still in it: it stays
            tmp.parent.rmdir()  # nothing of ours is left in a user's folder


def _create(tmp: Path) -> None:
    """Create the empty partial file (never through a link), and its folder if needed. Another
    writer that finishes may remove the folder when it is empty, so that is tried again."""
    tmp.parent.parent.mkdir(parents=True, exist_ok=True)  # the target's folder
    for _ in range(20):
        with contextlib.suppress(FileExistsError):  # there already (or being removed: the open says so)
            os.mkdir(tmp.parent)
        if tmp.parent.is_symlink():  # it would put the partial file wherever the link points
            raise ConfigError(f"{tmp.parent} is a symbolic link: remove it (this server writes partial files there)")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
            return
        except FileNotFoundError:
            continue  # the folder was removed in between
    raise ConfigError(f"{tmp.parent}: could not create a partial file there")


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
