"""An upload's files read as they arrive, each written to the staging folder while it comes.

A file stops being written the moment it passes the size cap (what was written of it is
removed), so nothing larger than the cap ever lands on disk; a multipart form parsed the usual way
would first spool the whole body (1 GB sent, 1 GB written) before any check could run. The whole
request has a cap too (``max_request_bytes``): a body that passes it is not read further, and
what it staged is removed with the staging folder.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.pdf.uploads import safe_filename


class UploadTooLarge(ConfigError):
    """The request passed its cap: not read further."""


def too_big(max_request_bytes: int) -> str:
    return f"{max_request_bytes // (1024 * 1024)} MB for one upload (EXTRACTION_MAX_UPLOAD_MB)"


@dataclass
class StagedFile:
    """One file of the upload: where it was staged, or why it was not kept."""

    sent_name: str
    path: Path | None  # None: over the cap (nothing of it kept)
    size: int = 0


@dataclass
class _Part:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    staged: StagedFile | None = None
    target: BinaryIO | None = None


async def stream_files(
    request: Request, *, field_name: str, directory: Path, max_bytes: int, max_files: int, max_request_bytes: int
) -> list[StagedFile]:
    """Every file sent in ``field_name``, staged in ``directory`` (which the caller removes).
    ConfigError when the request is not an upload, has too many files or is over its cap."""
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise ConfigError("an upload must be sent as multipart/form-data")
    files: list[StagedFile] = []
    part = _Part()
    header_name, header_value = b"", b""

    def on_part_begin() -> None:
        nonlocal part
        part = _Part()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        nonlocal header_name
        header_name += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        nonlocal header_value
        header_value += data[start:end]

    def on_header_end() -> None:
        nonlocal header_name, header_value
        part.headers[header_name.lower()] = header_value
        header_name, header_value = b"", b""

    def on_headers_finished() -> None:
        _, disposition = parse_options_header(part.headers.get(b"content-disposition", b""))
        if disposition.get(b"name", b"").decode("utf-8", "replace") != field_name or b"filename" not in disposition:
            return  # not a file of ours: read past it
        if len(files) >= max_files:
            raise ConfigError(f"too many files in one upload: at most {max_files}")
        sent = disposition[b"filename"].decode("utf-8", "replace")
        # Each file in a folder of its own, under the name it is registered by.
        folder = directory / f"{len(files) + 1:04d}"
        folder.mkdir()
        path = folder / safe_filename(sent)
        part.staged = StagedFile(sent, path)
        files.append(part.staged)
        part.target = path.open("wb")

    def on_part_data(data: bytes, start: int, end: int) -> None:
        staged = part.staged
        if staged is None:
            return
        staged.size += end - start
        if part.target is None:
            return  # already over the cap: counted, not kept
        if staged.size > max_bytes:
            part.target.close()
            part.target = None
            if staged.path is not None:
                staged.path.unlink(missing_ok=True)
            staged.path = None
            return
        part.target.write(data[start:end])

    def on_part_end() -> None:
        if part.target is not None:
            part.target.close()
            part.target = None

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_headers_finished": on_headers_finished,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_request_bytes:
                raise UploadTooLarge(f"larger than {too_big(max_request_bytes)}")
            parser.write(chunk)
        parser.finalize()
    finally:
        if part.target is not None:  # a body that ended mid-file
            with contextlib.suppress(OSError):
                part.target.close()
    return [staged for staged in files if staged.sent_name or staged.size]
