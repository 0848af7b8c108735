"""The main job: synthetic trial PDFs through the real machinery (daemon, run queue, sensors)."""

from __future__ import annotations

import os
import time
from typing import Any

from extraction_pipeline.core.errors import ExtractionRuntimeError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch, describe_state, get_batch
from extraction_pipeline.core.ledger.queries import progress
from extraction_pipeline.core.ledger.rows import BatchRow
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import write_reports
from extraction_pipeline.instance import DaemonProcess, init_home

DEMO_PROJECT = "demo"


def wait_for_batch(
    ledger: Ledger,
    batch_id: int,
    *,
    timeout_seconds: float,
    daemon: DaemonProcess | None = None,
    quiet: bool = False,
    poll_seconds: float = 1.0,
) -> BatchRow:
    """Poll every ``poll_seconds`` until the batch is closed *and* its workbook is written; print
    progress as it moves."""
    deadline = time.monotonic() + timeout_seconds
    last_line = ""
    while time.monotonic() < deadline:
        batch = get_batch(ledger, batch_id)
        assert batch is not None
        counts = progress(ledger, batch_id)
        line = (
            f"  batch {batch_id}: {counts.done}/{counts.total} done "
            f"(pending {counts.pending}, extracting {counts.extracting}, completed {counts.completed}, "
            f"error {counts.error}) {describe_state(batch)}"
        )
        if line != last_line and not quiet:
            print(line, flush=True)
            last_line = line
        if batch["status"] == "completed":
            return batch
        if daemon is not None and not daemon.alive():
            raise ExtractionRuntimeError(f"the Dagster daemon exited early; see {daemon.log_path}")
        time.sleep(poll_seconds)
    raise ExtractionRuntimeError(f"batch {batch_id} did not close within {timeout_seconds:.0f} s")


def run_demo(settings: Settings, *, documents: int = 5, timeout_seconds: float = 600) -> dict[str, Any]:
    started = time.monotonic()
    report = init_home(settings)
    model = os.environ.get("EXTRACTION_MODEL") or "offline/pattern-v1 (built-in, no API key)"
    print(f"home: {report.home}\nmodel: {model}")
    ledger = Ledger.connect(settings.ledger_url)
    run_stamp = time.strftime("%Y%m%dT%H%M%S")
    pdf_dir = settings.home_dir / "demo-pdfs" / run_stamp
    # A new range of synthetic trials on every demo run, so each demo is a fresh batch.
    offset = int(time.time()) % 100_000 * 10
    reports = write_reports(pdf_dir, documents, start=offset)
    doc_ids = [register_pdf(ledger, settings.documents_dir, DEMO_PROJECT, path).id for _, path in reports]
    print(f"registered {len(doc_ids)} synthetic trial PDFs from {pdf_dir}")
    batch_id = create_batch(
        ledger, idempotency_key=f"demo-{run_stamp}-{offset}", project=DEMO_PROJECT, user="demo", document_ids=doc_ids
    ).id
    print(f"batch {batch_id} created; starting the Dagster daemon (sensors, run queue)…")
    with DaemonProcess(settings) as daemon:
        batch = wait_for_batch(ledger, batch_id, timeout_seconds=timeout_seconds, daemon=daemon)
    counts = progress(ledger, batch_id)
    summary = {
        "batch_id": batch_id,
        "batch_status": batch["status"],
        "documents": counts.total,
        "completed": counts.completed,
        "errors": counts.error,
        "workbook": batch["export_path"],
        "seconds": round(time.monotonic() - started, 1),
    }
    print(
        f"\ndocuments {summary['documents']}  completed {summary['completed']}  errors {summary['errors']}  "
        f"({summary['seconds']} s)\nworkbook: {summary['workbook']}"
    )
    return summary
