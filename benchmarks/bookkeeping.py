"""Benchmark: the bookkeeping's cost at scale, on PostgreSQL (ledger and Dagster storage).

Seeds in bulk: N documents, one batch of N items, and R finished extraction runs of that batch in
Dagster's run storage (tagged like the dispatcher's runs). Then times, each as the median of
``--repeats``:

- the `batch_aggregator`'s first tick (no cursor yet: every open batch read in full), then a
  tick with nothing to do (the batch open, 10 items still extracting under STARTED runs, 10 runs
  ended seconds ago) and one tick that closes the batch (every item completed);
- one `batch_dispatcher` tick while the N items are pending (it dispatches 200 of them);
- `progress` of the N-item batch (what `batch status` shows) and `history` filtered by status;
- `create_batch` of 10,000 documents (the ledger work of `batch create`).

    .venv/bin/python -m benchmarks.bookkeeping [--items 100000] [--runs 100000] [--repeats 5]

It needs the PostgreSQL server at 127.0.0.1:5432 (a fresh database, dropped afterwards).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
from sqlalchemy import insert, update

from benchmarks.throughput import fresh_postgres
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger.batches import create_batch, get_batch
from extraction_pipeline.core.ledger.queries import history, progress
from extraction_pipeline.core.ledger.schema import ItemStatus, batch_items, documents


def _seed_documents(ledger: Ledger, count: int, project: str) -> list[int]:
    now = utcnow()
    rows = [
        {
            "project": project,
            "filename": f"trial-{n}.pdf",
            "sha256": uuid.uuid4().hex + uuid.uuid4().hex,
            "size_bytes": 1000,
            "pages": 10,
            "stored_path": f"/nowhere/{n}.pdf",
            "created_at": now,
        }
        for n in range(count)
    ]
    with ledger.engine.begin() as conn:
        for start in range(0, count, 10_000):
            conn.execute(insert(documents), rows[start : start + 10_000])
    with ledger.engine.connect() as conn:
        return list(conn.execute(documents.select().with_only_columns(documents.c.id)).scalars())


def _seed_runs(
    instance: dg.DagsterInstance, batch: dict[str, Any], doc_ids: list[int], count: int, *, age_seconds: float
) -> list[str]:
    """``count`` finished runs of the batch, shaped like the dispatcher's, that ended
    ``age_seconds`` ago: inserted in bulk through Dagster's own run-storage tables, with
    the columns its ``add_run`` writes (``add_run`` one by one would take ~15 minutes for 100,000)."""
    from dagster._core.storage.runs.schema import RunsTable, RunTagsTable
    from dagster._serdes import serialize_value

    storage: Any = instance.run_storage
    ended = datetime.now(UTC) - timedelta(seconds=age_seconds)
    run_ids = []
    for start in range(0, count, 5_000):
        run_rows, tag_rows = [], []
        for n in range(start, min(count, start + 5_000)):
            doc_id = doc_ids[n % len(doc_ids)]
            run = dg.DagsterRun(
                job_name="extract_documents",
                run_id=str(uuid.uuid4()),
                status=dg.DagsterRunStatus.SUCCESS,
                tags={
                    "extraction/batch": str(batch["id"]),
                    "extraction/batch_uid": batch["uid"],
                    "extraction/item": str(n % len(doc_ids) + 1),
                    "dagster/partition": f"doc-{doc_id}",
                },
            )
            naive = ended.replace(tzinfo=None)
            run_rows.append(
                {
                    "run_id": run.run_id,
                    "pipeline_name": run.job_name,
                    "status": run.status.value,
                    "run_body": serialize_value(run),
                    "partition": run.tags.get("dagster/partition"),
                    "create_timestamp": naive,
                    "update_timestamp": naive,
                    "end_time": ended.timestamp(),
                }
            )
            tag_rows.extend({"run_id": run.run_id, "key": k, "value": v} for k, v in run.tags_for_storage().items())
            run_ids.append(run.run_id)
        with storage.connect() as conn:
            conn.execute(RunsTable.insert(), run_rows)
            conn.execute(RunTagsTable.insert(), tag_rows)
    return run_ids


def _median(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _tick(instance: dg.DagsterInstance, url: str, home: str, cursor: str | None) -> Any:
    from extraction_pipeline.defs.resources import LedgerResource, PipelineSettingsResource
    from extraction_pipeline.defs.sensors import batch_aggregator

    context = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"ledger": LedgerResource(database_url=url), "settings": PipelineSettingsResource(home=home)},
    )
    return batch_aggregator(context)


def _dispatch_tick(instance: dg.DagsterInstance, url: str, home: str) -> Any:
    from extraction_pipeline.core.settings import Settings
    from extraction_pipeline.defs.binding import DOCUMENTS_TAG

    DOCUMENTS_PER_RUN = Settings.from_env().documents_per_run
    from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
    from extraction_pipeline.defs.sensors import DISPATCH_PER_TICK, batch_dispatcher

    context = dg.build_sensor_context(
        instance=instance,
        resources={
            "ledger": LedgerResource(database_url=url),
            "llm": LLMResource(),
            "settings": PipelineSettingsResource(home=home),
        },
    )
    result = batch_dispatcher(context)
    # A full tick: DISPATCH_PER_TICK items, in runs of DOCUMENTS_PER_RUN (fewer than RUNS_PER_TICK).
    runs = result.run_requests or []
    documents = sum(len(run.tags.get(DOCUMENTS_TAG, "-").split(",")) for run in runs)
    assert (documents, len(runs)) == (DISPATCH_PER_TICK, math.ceil(DISPATCH_PER_TICK / DOCUMENTS_PER_RUN)), result
    return result


class _Ticks:
    """Aggregator ticks that carry the cursor from one to the next, as the daemon does."""

    def __init__(self, instance: dg.DagsterInstance, url: str, home: str) -> None:
        self.instance, self.url, self.home = instance, url, home
        self.cursor: str | None = None

    def __call__(self) -> None:
        result = _tick(self.instance, self.url, self.home, self.cursor)
        self.cursor = result.cursor or self.cursor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"bookkeeping: {args.items} items, {args.runs} runs in Dagster's storage, PostgreSQL, cores={os.cpu_count()}")
    with fresh_postgres("bench_bookkeeping") as url, tempfile.TemporaryDirectory() as home:
        ledger = Ledger.connect(url)
        started = time.perf_counter()
        doc_ids = _seed_documents(ledger, args.items + 10_000, "bench")
        batch_id = create_batch(
            ledger, idempotency_key="big", project="bench", user="a", document_ids=doc_ids[: args.items]
        ).id
        batch = get_batch(ledger, batch_id)
        assert batch is not None
        storage = {"storage": {"postgres": {"postgres_url": url}}}
        with dg.instance_for_test(overrides=storage) as instance:
            _seed_runs(instance, batch, doc_ids[: args.items], args.runs - 10, age_seconds=3600)
            # Ten more that ended just now: what a tick during a batch reads (and finds settled).
            recent = _seed_runs(instance, batch, doc_ids[10:20], 10, age_seconds=5)
            print(f"  seeded in {time.perf_counter() - started:.0f} s ({len(recent)} runs ended just now)")
            # The batch's documents as partitions, as the partition sensor publishes them.
            instance.add_dynamic_partitions("documents", [f"doc-{doc_id}" for doc_id in doc_ids[: args.items]])
            dispatch = _median(lambda: _dispatch_tick(instance, url, home), 1)
            print(
                f"  batch_dispatcher tick ({args.items} items pending, a tick's worth dispatched): "
                f"{dispatch * 1000:8.0f} ms"
            )
            # Ten documents still extracting, each under a working run of the dispatcher's shape.
            live = [str(uuid.uuid4()) for _ in range(10)]
            for doc_id, run_id in zip(doc_ids[:10], live, strict=True):
                instance.add_run(
                    dg.DagsterRun(
                        job_name="extract_documents",
                        run_id=run_id,
                        status=dg.DagsterRunStatus.STARTED,
                        tags={"extraction/batch_uid": batch["uid"], "dagster/partition": f"doc-{doc_id}"},
                    )
                )
            with ledger.engine.begin() as conn:
                conn.execute(
                    update(batch_items)
                    .where(batch_items.c.batch_id == batch_id)
                    .values(status=ItemStatus.COMPLETED, run_id="seeded", finished_at=utcnow())
                )
                extracting = doc_ids[:10]
                for doc_id, run_id in zip(extracting, live, strict=True):
                    conn.execute(
                        update(batch_items)
                        .where(batch_items.c.batch_id == batch_id, batch_items.c.document_id == doc_id)
                        .values(status=ItemStatus.EXTRACTING, run_id=run_id, updated_at=utcnow())
                    )
            ticks = _Ticks(instance, url, home)
            first = _median(ticks, 1)
            print(f"  batch_aggregator first tick (no cursor: every open batch read in full): {first * 1000:8.0f} ms")
            idle = _median(ticks, args.repeats)
            print(f"  batch_aggregator tick, nothing to do:     {idle * 1000:8.0f} ms")
            status = _median(lambda: progress(ledger, batch_id), args.repeats)
            print(f"  batch status (progress of {args.items} items): {status * 1000:8.0f} ms")
            filtered = _median(lambda: history(ledger, status="error", limit=50), args.repeats)
            print(f"  history --status error:                   {filtered * 1000:8.0f} ms")
            with ledger.engine.begin() as conn:
                conn.execute(
                    update(batch_items)
                    .where(batch_items.c.batch_id == batch_id)
                    .values(status=ItemStatus.COMPLETED, run_id="seeded")
                )
            started = time.perf_counter()
            ticks()
            print(f"  batch_aggregator tick closing the batch:  {(time.perf_counter() - started) * 1000:8.0f} ms")
            assert (get_batch(ledger, batch_id) or {}).get("status") == "completed"
        ten_thousand = doc_ids[args.items : args.items + 10_000]
        counter = iter(range(1_000_000))
        create = _median(
            lambda: create_batch(
                ledger, idempotency_key=f"ten-{next(counter)}", project="bench", user="a", document_ids=ten_thousand
            ),
            args.repeats,
        )
        print(f"  create_batch of 10,000 documents:          {create * 1000:8.0f} ms")
        ledger.dispose()


if __name__ == "__main__":
    main()
