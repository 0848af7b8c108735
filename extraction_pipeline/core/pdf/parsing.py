"""Parse a registered document, cache-aside, content-addressed.

Key = sha256 of the bytes + parser version: the same content is parsed once, in any batch or
project (a cache hit is a single row read). The parse itself runs isolated in a child process
with a hard timeout (pdf/isolation.py). Permanent failures are cached as well, so a PDF that
hangs the parser costs its timeout once, not once per attempt. On a miss the stored copy must still
hash to the key: a copy that was replaced or is a link is refused, and that verdict is not cached
(it says nothing about the content; once the PDF is added again the parse works).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger.contents import read_content
from extraction_pipeline.core.ledger.schema import parsed_documents
from extraction_pipeline.core.pdf.engine import ENGINE
from extraction_pipeline.core.pdf.isolation import ParseOptions, ParseTimeout, run_each, run_isolated
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.pdf.registration import READD_HINT, copy_hashing, open_stored_copy

PARSE_SLICE = 25  # misses verified and parsed at a time by parse_documents

__all__ = ["ParseOptions", "ParsedDocument", "parse_document"]


def _from_row(row: Any, sha256: str, started: float, parser_version: str) -> ParsedDocument:
    return ParsedDocument(
        sha256=sha256,
        pages_text=json.loads(row["pages_json"]),
        tables=[ParsedTable(**t) for t in json.loads(row["tables_json"])],
        layout=json.loads(row["layout_json"] or "[]"),
        engine=row["engine"],
        engine_version=row["engine_version"],
        parser_version=parser_version,
        seconds=round(time.perf_counter() - started, 4),
        cache_hit=True,
    )


def _store(ledger: Ledger, values: dict[str, Any]) -> None:
    try:
        with ledger.engine.begin() as conn:
            conn.execute(insert(parsed_documents).values(created_at=utcnow(), **values))
    except IntegrityError:
        pass  # a concurrent run cached the same content first; its result equals ours


def parse_document(
    ledger: Ledger, *, sha256: str, stored_path: str, options: ParseOptions | None = None
) -> ParsedDocument:
    """The parsed pages and tables for this content; from the cache when present."""
    options = options or ParseOptions()
    cached = _from_cache(ledger, sha256, options)
    if cached is not None:
        return cached
    with _verified_copy(ledger, Path(stored_path), sha256) as pdf:
        return _parse_and_cache(ledger, pdf, sha256, options)


def parse_documents(
    ledger: Ledger, documents: list[tuple[str, str]], options: ParseOptions | None = None
) -> list[ParsedDocument | PermanentError]:
    """Each ``(sha256, stored_path)`` as ``parse_document`` gives it, or why not, in order; the
    ones not cached are read by one isolated child after another (pdf/isolation.run_each), so a
    hundred papers pay one child's start, not a hundred. The same content twice is parsed once;
    the misses go ``PARSE_SLICE`` at a time (each needs a verified copy on disk meanwhile)."""
    options = options or ParseOptions()
    verdicts: dict[str, ParsedDocument | PermanentError] = {}
    misses: dict[str, str] = {}  # sha256 -> stored path, each content once
    for sha256, stored_path in documents:
        if sha256 in verdicts or sha256 in misses:
            continue
        try:
            cached = _from_cache(ledger, sha256, options)
        except PermanentError as exc:
            verdicts[sha256] = exc
            continue
        if cached is not None:
            verdicts[sha256] = cached
        else:
            misses[sha256] = stored_path
    pending = list(misses.items())
    for start in range(0, len(pending), PARSE_SLICE):
        verdicts.update(_parse_slice(ledger, pending[start : start + PARSE_SLICE], options))
    return [verdicts[sha256] for sha256, _ in documents]


def _parse_slice(
    ledger: Ledger, misses: list[tuple[str, str]], options: ParseOptions
) -> dict[str, ParsedDocument | PermanentError]:
    verdicts: dict[str, ParsedDocument | PermanentError] = {}
    with ExitStack() as copies:
        verified: list[tuple[str, Path]] = []
        for sha256, stored_path in misses:
            try:
                verified.append((sha256, copies.enter_context(_verified_copy(ledger, Path(stored_path), sha256))))
            except PermanentError as exc:  # a refused copy: not cached (it says nothing about the content)
                verdicts[sha256] = exc
            except OSError as exc:  # no room or no right to copy it here: not cached either
                verdicts[sha256] = PermanentError(f"{Path(stored_path).name}: cannot be read ({exc.strerror or exc})")
        pdfs = [pdf for _, pdf in verified]
        outcomes = run_each(pdfs, timeout_seconds=options.timeout_seconds, limits=options.limits) if pdfs else []
        for (sha256, pdf), outcome in zip(verified, outcomes, strict=True):
            if outcome.value is not None:
                verdicts[sha256] = _store_result(ledger, sha256, options, outcome.value)
                continue
            # A child that read other PDFs first may have failed for what they left (its memory):
            # only a failure seen in a fresh child of its own is cached as the content's.
            try:
                verdicts[sha256] = _parse_and_cache(ledger, pdf, sha256, options)
            except PermanentError as exc:
                verdicts[sha256] = exc
    return verdicts


def _from_cache(ledger: Ledger, sha256: str, options: ParseOptions) -> ParsedDocument | None:
    """The cached parse of this content (PermanentError: its cached failure); None when it must be
    parsed (never, or it timed out under a shorter limit than this one)."""
    version = options.limits.parser_version
    started = time.perf_counter()
    with ledger.engine.connect() as conn:
        row = (
            conn.execute(
                select(parsed_documents).where(
                    parsed_documents.c.sha256 == sha256, parsed_documents.c.parser_version == version
                )
            )
            .mappings()
            .first()
        )
    if row is not None:
        if row["error"] is None:
            return _from_row(row, sha256, started, version)
        retry_with_longer_timeout = row["timeout_seconds"] and options.timeout_seconds > row["timeout_seconds"]
        if not retry_with_longer_timeout:
            raise PermanentError(row["error"])
        with ledger.engine.begin() as conn:
            conn.execute(
                parsed_documents.delete().where(
                    parsed_documents.c.sha256 == sha256, parsed_documents.c.parser_version == version
                )
            )
    return None


def parsed_contents(ledger: Ledger, sha256s: list[str], parser_version: str) -> set[str]:
    """Which of these contents have a successful parse cached for this parser version (one query)."""
    if not sha256s:
        return set()
    statement = select(parsed_documents.c.sha256).where(
        parsed_documents.c.sha256.in_(sorted(set(sha256s))),
        parsed_documents.c.parser_version == parser_version,
        parsed_documents.c.error.is_(None),
    )
    with ledger.engine.connect() as conn:
        return {row[0] for row in conn.execute(statement)}


@contextmanager
def _verified_copy(ledger: Ledger, stored: Path, sha256: str) -> Iterator[Path]:
    """A private copy of the stored PDF, hashed while it is copied, for the parser to read.

    The parser reads exactly the bytes that were verified: the stored file being swapped between
    the check and the parse changes nothing. Copying costs about as much as hashing (milliseconds
    for a few MB). Refusals are raised before any parse, so they are never cached. A machine
    without the stored copy (a worker with its own home) reads the bytes from a shared ledger."""
    with tempfile.TemporaryDirectory(prefix="verified-") as tmp:
        copy = Path(tmp) / stored.name
        if not os.path.lexists(stored) and (content := read_content(ledger, sha256)) is not None:
            with io.BytesIO(content) as source, copy.open("wb") as target:
                actual = copy_hashing(source, target)
            if actual != sha256:
                raise PermanentError(f"the ledger's copy of {stored.name} does not match its sha256: {READD_HINT}")
            yield copy
            return
        with open_stored_copy(stored) as source, copy.open("wb") as target:
            actual = copy_hashing(source, target)
        if actual != sha256:
            raise PermanentError(
                f"stored copy {stored.name} does not match its registered sha256"
                f" (modified or replaced since it was added): {READD_HINT}"
            )
        yield copy


def _parse_and_cache(ledger: Ledger, path: Path, sha256: str, options: ParseOptions) -> ParsedDocument:
    """Parse ``path`` in isolation and cache the result, or the permanent failure, under ``sha256``."""
    try:
        result = run_isolated(path, timeout_seconds=options.timeout_seconds, limits=options.limits)
    except PermanentError as exc:
        _store_failure(ledger, sha256, options, exc)
        raise
    return _store_result(ledger, sha256, options, result)


def _row(sha256: str, options: ParseOptions) -> dict[str, Any]:
    return {
        "sha256": sha256,
        "parser_version": options.limits.parser_version,
        "engine": ENGINE,
        "engine_version": "",
        "pages": 0,
        "seconds": 0.0,
        "pages_json": "[]",
        "tables_json": "[]",
        "layout_json": "[]",
    }


def _store_failure(ledger: Ledger, sha256: str, options: ParseOptions, failure: PermanentError) -> None:
    """A parse's permanent failure, cached: the same bytes are not parsed again (a timeout only
    under a longer limit)."""
    timed_out = {"timeout_seconds": failure.seconds} if isinstance(failure, ParseTimeout) else {}
    _store(ledger, {**_row(sha256, options), "error": str(failure), **timed_out})


def _store_result(ledger: Ledger, sha256: str, options: ParseOptions, result: dict[str, Any]) -> ParsedDocument:
    _store(
        ledger,
        {
            **_row(sha256, options),
            "engine_version": result["engine_version"],
            "pages": len(result["pages_text"]),
            "seconds": result["seconds"],
            "pages_json": json.dumps(result["pages_text"], ensure_ascii=False),
            "tables_json": json.dumps(result["tables"], ensure_ascii=False),
            "layout_json": json.dumps(result.get("layout", [])),
        },
    )
    return ParsedDocument(
        sha256=sha256,
        pages_text=result["pages_text"],
        tables=[ParsedTable(**t) for t in result["tables"]],
        layout=result.get("layout", []),
        engine=result["engine"],
        engine_version=result["engine_version"],
        parser_version=options.limits.parser_version,
        seconds=result["seconds"],
        cache_hit=False,
    )
