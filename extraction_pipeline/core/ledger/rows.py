"""The ledger's rows as typed values: a document, a batch, one document's item in a batch.

They are the tables' columns (``schema.py``) as dictionaries with known keys, so code that reads
``item["run_id"]`` is checked by mypy against the table. Rows are read with SQLAlchemy's
``.mappings()`` and copied into these; the ``*_row`` functions are the only casts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict, cast


class DocumentRow(TypedDict):
    id: int
    project: str
    filename: str
    sha256: str
    size_bytes: int
    pages: int
    stored_path: str
    created_at: datetime
    partition_key: str | None  # None in ledgers older than readable partition keys
    title: str | None  # what the PDF says it is (None: it does not say, or an older ledger)
    first_author: str | None
    year: int | None


class BatchRow(TypedDict):
    id: int
    idempotency_key: str
    uid: str
    project: str
    user: str
    origin: str  # a BatchOrigin's value
    origin_ref: str | None
    status: str  # a BatchStatus's value
    total_items: int
    created_at: datetime
    completed_at: datetime | None
    export_path: str | None
    template_id: int | None
    export_version: int
    export_error: str | None
    export_attempts: int
    export_failed_at: datetime | None
    fresh: int
    second_model: str | None
    adjudicator_model: str | None
    follow_up: int
    provider_batch: str | None  # a ProviderBatchPhase's value; None: ordinary calls


class ItemRow(TypedDict):
    id: int
    batch_id: int
    document_id: int
    status: str  # an ItemStatus's value
    attempts: int
    dispatched_at: datetime | None
    dispatched_by: str | None
    run_id: str | None
    worker: str | None
    message: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    model: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    cached_tokens: int
    saved_usd: float
    cache_written_tokens: int
    abandoned_calls: int
    result_json: str | None
    dispatch_round: int
    retry_round: int
    failing_since: datetime | None


def document_row(mapping: Mapping[Any, Any]) -> DocumentRow:
    return cast(DocumentRow, dict(mapping))


def batch_row(mapping: Mapping[Any, Any]) -> BatchRow:
    return cast(BatchRow, dict(mapping))


def item_row(mapping: Mapping[Any, Any]) -> ItemRow:
    return cast(ItemRow, dict(mapping))


class ItemListing(ItemRow):
    """An item with what lists of items show beside it: its document's and its batch's names."""

    filename: str
    project: str
    sha256: str
    pages: int
    stored_path: str
    partition_key: str | None
    first_author: str | None  # read from the PDF at registration (core.pdf.bibliography)
    year: int | None
    user: str
    origin: str
    batch_uid: str


def item_listing(mapping: Mapping[Any, Any]) -> ItemListing:
    return cast(ItemListing, dict(mapping))
