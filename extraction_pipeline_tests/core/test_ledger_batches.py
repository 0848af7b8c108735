"""Batch invariants, on SQLite and PostgreSQL: idempotent creation, empty batches, closing."""

from __future__ import annotations

import multiprocessing

import pytest

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import BatchRef, close_if_done, create_batch, get_batch
from extraction_pipeline.core.ledger.database import schema_fingerprint
from extraction_pipeline.core.ledger.documents import projects_of
from extraction_pipeline.core.ledger.items import find_item
from extraction_pipeline.core.ledger.queries import active_items, progress
from extraction_pipeline.core.ledger.schema import batch_items, batches
from extraction_pipeline.core.usage import Usage
from extraction_pipeline_tests.support.ledgers import add_documents
from extraction_pipeline_tests.support.processes import warm_context


def _create_in_process(
    url: str,
    key: str,
    doc_ids: list[int],
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.Queue[object],
) -> None:
    ledger = Ledger.connect(url, create_schema=False)
    barrier.wait()  # all 20 processes insert at the same moment
    ref = create_batch(ledger, idempotency_key=key, project="p", user="u", document_ids=doc_ids)
    out.put((ref.id, ref.created))


def test_twenty_concurrent_creations_make_one_batch(ledger: Ledger, ledger_url: str) -> None:
    doc_ids = add_documents(ledger, 5)
    ctx = warm_context()
    barrier = ctx.Barrier(20)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_create_in_process, args=(ledger_url, "same-key", doc_ids, barrier, out)) for _ in range(20)
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    ids = {batch_id for batch_id, _ in results}
    assert len(ids) == 1, results
    assert sum(created for _, created in results) == 1
    with ledger.engine.connect() as conn:
        assert conn.execute(batches.select()).all().__len__() == 1
    assert progress(ledger, ids.pop()).total == 5


def test_same_key_returns_existing_batch_without_new_items(ledger: Ledger) -> None:
    doc_ids = add_documents(ledger, 3)
    first = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    again = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids[:1])
    assert (first.created, again.created, again.id) == (True, False, first.id)
    assert progress(ledger, first.id).total == 3


def test_empty_batch_closes_immediately(ledger: Ledger) -> None:
    ref = create_batch(ledger, idempotency_key="empty", project="p", user="u", document_ids=[])
    batch = get_batch(ledger, ref.id)
    assert batch is not None
    # Closed at once: nothing to wait for but its (empty) workbook.
    assert batch["status"] == "exporting" and batch["completed_at"] is not None
    assert progress(ledger, ref.id).percent == 100.0


def test_unknown_document_is_a_config_error_and_creates_nothing(ledger: Ledger) -> None:
    known = add_documents(ledger, 2)
    with pytest.raises(ConfigError, match=r"unknown document id\(s\): 999, 1000$"):
        create_batch(ledger, idempotency_key="bad", project="p", user="u", document_ids=[known[0], 999, 1000])
    with ledger.engine.connect() as conn:
        assert conn.execute(batches.select()).all() == []
        assert conn.execute(batch_items.select()).all() == []


def test_a_batch_has_one_pending_item_per_distinct_document(ledger: Ledger) -> None:
    """The items are inserted from the ids sent as one parameter: every document once, whatever
    the list's length or repeats."""
    docs = add_documents(ledger, 1200)
    ref = create_batch(ledger, idempotency_key="big", project="p", user="u", document_ids=[*docs, *docs[:7]])
    with ledger.engine.connect() as conn:
        rows = conn.execute(batch_items.select().where(batch_items.c.batch_id == ref.id)).mappings().all()
    assert sorted(row["document_id"] for row in rows) == sorted(docs)
    assert {(row["status"], row["attempts"], row["dispatch_round"], row["dispatched_at"]) for row in rows} == {
        ("pending", 0, 0, None)
    }
    assert len({row["created_at"] for row in rows}) == 1 and rows[0]["created_at"] == rows[0]["updated_at"]
    assert progress(ledger, ref.id).pending == 1200


def test_id_lists_longer_than_sqlite_parameter_limit_are_one_parameter(ledger: Ledger) -> None:
    """Every id list the ledger sends is one parameter: 260,000 ids (SQLite allows 32,766 bound
    parameters per statement by default, 250,000 in some builds) select, mark and map exactly the
    ids that exist."""
    docs = add_documents(ledger, 300)
    ref = create_batch(ledger, idempotency_key="ids", project="p", user="u", document_ids=docs)
    strangers = list(range(10**6, 10**6 + 260_000))
    wanted = [*docs[:100], *strangers]

    assert sorted(item["document_id"] for item in active_items(ledger, ref.id, document_ids=wanted)) == docs[:100]
    assert projects_of(ledger, wanted) == dict.fromkeys(docs[:100], "p")
    item_ids = [item["id"] for item in active_items(ledger, ref.id, document_ids=docs[:50])]
    assert states.mark_dispatched(ledger, [*item_ids, *strangers]) == set(item_ids)
    assert states.mark_dispatched(ledger, item_ids) == set()  # already marked: none taken twice
    assert active_items(ledger, ref.id, document_ids=[]) == [] and projects_of(ledger, []) == {}


def test_batch_closes_only_when_nothing_pending_or_extracting(ledger: Ledger) -> None:
    a, b = add_documents(ledger, 2)
    ref = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[a, b])
    item_a, item_b = (find_item(ledger, batch_id=ref.id, document_id=d)["id"] for d in (a, b))  # type: ignore[index]
    assert not close_if_done(ledger, ref.id)  # two pending
    assert states.claim(ledger, item_a, run_id="r1", worker="w")
    assert states.complete(ledger, item_a, run_id="r1", result={}, usage=Usage("m"))
    assert not close_if_done(ledger, ref.id)  # one still pending
    assert states.claim(ledger, item_b, run_id="r2", worker="w")
    assert not close_if_done(ledger, ref.id)  # one extracting
    assert states.fail(ledger, item_b, message="boom", run_id="r2")
    assert close_if_done(ledger, ref.id)
    batch = get_batch(ledger, ref.id)
    assert batch is not None and batch["status"] == "exporting" and batch["completed_at"] is not None
    assert not close_if_done(ledger, ref.id)  # closing twice is a no-op that says so


def test_progress_counts_by_status_in_one_query(ledger: Ledger) -> None:
    ids = add_documents(ledger, 4)
    ref = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=ids)
    states.claim(ledger, 1, run_id="r", worker="w")
    states.complete(ledger, 1, run_id="r", result={}, usage=Usage("m", 10, 5, 0.25))
    states.claim(ledger, 2, run_id="r", worker="w")
    states.claim(ledger, 3, run_id="r", worker="w")
    states.fail(ledger, 3, message="x", run_id="r", usage=Usage("m", 7, 0, 0.5))
    counts = progress(ledger, ref.id)
    assert (counts.total, counts.pending, counts.extracting, counts.completed, counts.error) == (4, 1, 1, 1, 1)
    assert (counts.tokens_in, counts.tokens_out, counts.cost_usd, counts.percent) == (17, 5, 0.75, 50.0)


def test_a_key_used_by_another_project_is_refused_not_handed_over(ledger: Ledger) -> None:
    docs = add_documents(ledger, 2)
    first = create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=docs[:1])
    with pytest.raises(ConfigError, match="already belongs to batch 1 of project 'p'"):
        create_batch(ledger, idempotency_key="k", project="q", user="u", document_ids=docs[1:])
    assert create_batch(ledger, idempotency_key="k", project="p", user="v", document_ids=docs) == BatchRef(
        first.id, created=False
    )


def test_an_existing_ledger_gains_the_indexes_added_since(ledger_url: str) -> None:
    """Any connect on a ledger from an earlier release (which recorded no schema fingerprint, or
    another one) creates the indexes the dispatcher and the aggregator rely on, and records this
    release's fingerprint; a second start changes nothing."""
    from sqlalchemy import inspect, text

    ledger = Ledger.connect(ledger_url)
    with ledger.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_items_status_dispatched"))
        conn.execute(text("DROP TABLE ledger_meta"))  # releases before it had none
    assert "ix_items_status_dispatched" not in {i["name"] for i in inspect(ledger.engine).get_indexes("batch_items")}
    ledger.dispose()
    upgraded = Ledger.connect(ledger_url)
    assert "ix_items_status_dispatched" in {i["name"] for i in inspect(upgraded.engine).get_indexes("batch_items")}
    assert _recorded_fingerprint(upgraded) == schema_fingerprint()
    Ledger.connect(ledger_url).dispose()
    upgraded.dispose()


def _recorded_fingerprint(ledger: Ledger) -> str | None:
    from sqlalchemy import text

    with ledger.engine.connect() as conn:
        return conn.execute(text("SELECT value FROM ledger_meta WHERE key = 'schema'")).scalar()


def _statements_of_connect(url: str, **kwargs: bool) -> list[str]:
    from sqlalchemy import event

    from extraction_pipeline.core.ledger.database import create_ledger_engine

    ledger = Ledger(create_ledger_engine(url))
    seen: list[str] = []
    event.listen(ledger.engine, "before_cursor_execute", lambda _c, _cur, sql, *_: seen.append(sql))
    ledger.create_schema(**kwargs)
    ledger.dispose()
    return [sql for sql in seen if sql.strip().upper() != "SELECT 1"]  # not the pool's pre-ping


def test_a_ledger_that_records_this_release_schema_is_trusted_after_one_query(ledger_url: str) -> None:
    """Each command and run worker connects: a current ledger costs one query, not an
    inspection of every table; a different recorded fingerprint (another release) or `init`'s
    full check inspects again and repairs what is missing."""
    from sqlalchemy import inspect, text

    Ledger.connect(ledger_url).dispose()
    trusted = _statements_of_connect(ledger_url)
    assert len(trusted) == 1 and "ledger_meta" in trusted[0]

    ledger = Ledger.connect(ledger_url)
    with ledger.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_items_batch_status"))
        conn.execute(text("UPDATE ledger_meta SET value = 'an-older-release' WHERE key = 'schema'"))
    assert len(_statements_of_connect(ledger_url)) > 10  # inspected again
    assert "ix_items_batch_status" in {i["name"] for i in inspect(ledger.engine).get_indexes("batch_items")}
    assert _recorded_fingerprint(ledger) == schema_fingerprint()

    with ledger.engine.begin() as conn:  # dropped by hand: only the full check can know
        conn.execute(text("DROP INDEX ix_items_batch_status"))
    assert len(_statements_of_connect(ledger_url)) == 1
    assert len(_statements_of_connect(ledger_url, full_check=True)) > 10
    assert "ix_items_batch_status" in {i["name"] for i in inspect(ledger.engine).get_indexes("batch_items")}
    ledger.dispose()
