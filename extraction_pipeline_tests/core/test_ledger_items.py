"""The item state machine, on SQLite and PostgreSQL: every transition is conditional."""

from __future__ import annotations

from datetime import timedelta

from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.schema import batch_items
from extraction_pipeline.core.usage import Usage
from extraction_pipeline_tests.support.ledgers import add_documents


def _one_item(ledger: Ledger) -> int:
    [doc] = add_documents(ledger, 1)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc])
    item = states.find_item(ledger, batch_id=1, document_id=doc)
    assert item is not None
    return int(item["id"])


def _status(ledger: Ledger, item_id: int) -> str:
    item = states.get_item(ledger, item_id)
    assert item is not None
    return str(item["status"])


def test_claim_only_from_pending(ledger: Ledger) -> None:
    item = _one_item(ledger)
    assert states.claim(ledger, item, run_id="r1", worker="w1")
    assert not states.claim(ledger, item, run_id="r2", worker="w2")  # duplicate execution
    row = states.get_item(ledger, item)
    assert row is not None and (row["status"], row["run_id"], row["attempts"]) == ("extracting", "r1", 1)


def test_finished_item_cannot_be_claimed_or_overwritten(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.claim(ledger, item, run_id="r1", worker="w")
    assert states.complete(ledger, item, run_id="r1", result={"v": 1}, usage=Usage("m"))
    assert not states.claim(ledger, item, run_id="late", worker="w")
    assert not states.complete(ledger, item, run_id="r1", result={"v": 2}, usage=Usage("m"))
    assert not states.fail(ledger, item, message="late failure", run_id="r1")
    assert not states.release(ledger, item, run_id="r1", message="late")
    row = states.get_item(ledger, item)
    assert row is not None and row["status"] == "completed" and row["result_json"] == '{"v": 1}'


def test_only_the_holding_run_completes(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.claim(ledger, item, run_id="r1", worker="w")
    assert not states.complete(ledger, item, run_id="intruder", result={}, usage=Usage("m"))
    assert _status(ledger, item) == "extracting"


def test_transient_release_returns_to_pending_with_message(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.claim(ledger, item, run_id="r1", worker="w")
    assert states.release(ledger, item, run_id="r1", message="429 rate limited")
    row = states.get_item(ledger, item)
    assert row is not None and (row["status"], row["message"]) == ("pending", "429 rate limited")
    assert states.claim(ledger, item, run_id="r1", worker="w")  # the retry claims again
    assert states.get_item(ledger, item)["attempts"] == 2  # type: ignore[index]


def test_permanent_fail_records_message(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.claim(ledger, item, run_id="r1", worker="w")
    assert states.fail(ledger, item, message="401 invalid api key", run_id="r1")
    row = states.get_item(ledger, item)
    assert row is not None and (row["status"], row["message"]) == ("error", "401 invalid api key")
    assert not states.claim(ledger, item, run_id="r2", worker="w")


def test_take_over_only_from_the_named_dead_run(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.claim(ledger, item, run_id="alive", worker="w")
    assert not states.take_over(ledger, item, dead_run_id="other", run_id="retry", worker="w")
    assert states.take_over(ledger, item, dead_run_id="alive", run_id="retry", worker="w2")
    row = states.get_item(ledger, item)
    assert row is not None and (row["run_id"], row["status"]) == ("retry", "extracting")
    assert "taken over from run alive" in (row["message"] or "")


def test_sweep_uses_updated_at_not_batch_creation(ledger: Ledger) -> None:
    first, second = add_documents(ledger, 2)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[first, second])
    old, fresh = 1, 2
    # The batch was created long ago (queue time must not count) ...
    long_ago = utcnow() - timedelta(hours=5)
    with ledger.engine.begin() as conn:
        conn.execute(batch_items.update().values(created_at=long_ago, updated_at=long_ago))
    states.claim(ledger, old, run_id="r1", worker="w")
    states.claim(ledger, fresh, run_id="r2", worker="w")
    # ... but only the item whose extraction has not moved for 31 minutes is stale.
    with ledger.engine.begin() as conn:
        conn.execute(
            batch_items.update().where(batch_items.c.id == old).values(updated_at=utcnow() - timedelta(minutes=31))
        )
    [stale] = states.stale_items(ledger, idle=timedelta(minutes=30))
    assert stale["id"] == old
    assert states.sweep(ledger, stale, idle=timedelta(minutes=30), reason="no run alive")
    row = states.get_item(ledger, old)
    assert row is not None and row["status"] == "error" and "no progress for over 30 min" in (row["message"] or "")
    assert _status(ledger, fresh) == "extracting"
    assert states.stale_items(ledger, idle=timedelta(minutes=30)) == []
    assert not states.sweep(ledger, stale, idle=timedelta(minutes=30), reason="again")  # already error


def test_sweep_threshold_is_configurable(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.claim(ledger, item, run_id="r", worker="w")
    with ledger.engine.begin() as conn:
        conn.execute(batch_items.update().values(updated_at=utcnow() - timedelta(minutes=6)))
    assert states.stale_items(ledger, idle=timedelta(minutes=10)) == []
    [stale] = states.stale_items(ledger, idle=timedelta(minutes=5))
    assert states.sweep(ledger, stale, idle=timedelta(minutes=5), reason="no run alive")
    swept = states.get_item(ledger, item)
    assert swept is not None and "over 5 min" in (swept["message"] or "")


def test_sweep_leaves_an_item_that_moved_after_it_was_read(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.claim(ledger, item, run_id="r", worker="w")
    with ledger.engine.begin() as conn:
        conn.execute(batch_items.update().values(updated_at=utcnow() - timedelta(minutes=40)))
    [stale] = states.stale_items(ledger, idle=timedelta(minutes=30))
    states.resume(ledger, item, run_id="r", worker="w")  # the worker moved on meanwhile
    assert not states.sweep(ledger, stale, idle=timedelta(minutes=30), reason="no run alive")
    assert _status(ledger, item) == "extracting"


def test_updated_at_moves_on_every_transition(ledger: Ledger) -> None:
    item = _one_item(ledger)
    stamps = [states.get_item(ledger, item)["updated_at"]]  # type: ignore[index]
    states.claim(ledger, item, run_id="r", worker="w")
    stamps.append(states.get_item(ledger, item)["updated_at"])  # type: ignore[index]
    states.release(ledger, item, run_id="r", message="t")
    stamps.append(states.get_item(ledger, item)["updated_at"])  # type: ignore[index]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3


def test_a_rate_limit_waited_out_in_the_call_is_told_in_the_documents_story(ledger: Ledger) -> None:
    item = _one_item(ledger)
    states.note_waited(ledger, item, run_id="r1", cause="HTTP 429 RateLimitError: slow down")  # not claimed: nothing
    assert states.item_history_of(ledger, item) == []
    assert states.claim(ledger, item, run_id="r1", worker="w1")
    for _ in range(2):
        states.note_waited(ledger, item, run_id="r1", cause="HTTP 429 RateLimitError: slow down")
    states.note_waited(ledger, item, run_id="r2", cause="not the holder")  # another run's word is not taken
    assert _status(ledger, item) == "extracting"  # a wait is not a transition
    assert states.complete(ledger, item, run_id="r1", result={}, usage=Usage("m"))
    row = states.get_item(ledger, item)
    assert row is not None
    assert row["message"] == "completed on attempt 1, after: waited out: HTTP 429 RateLimitError: slow down (2 times)"


def test_a_document_retried_after_an_error_tells_the_error_when_it_completes(ledger: Ledger) -> None:
    from extraction_pipeline.core.ledger.reopening import retry_failed

    item = _one_item(ledger)
    assert states.claim(ledger, item, run_id="r1", worker="w1")
    assert states.fail(ledger, item, run_id="r1", message="openai/gpt-4o-mini refused: I can't help with that")
    batch = states.get_item(ledger, item)["batch_id"]  # type: ignore[index]
    assert retry_failed(ledger, batch, actor="ann").retried
    assert states.claim(ledger, item, run_id="r2", worker="w2")
    assert states.complete(ledger, item, run_id="r2", result={}, usage=Usage("m"))
    row = states.get_item(ledger, item)
    assert row is not None
    assert row["message"] == (
        "completed on attempt 2, after: openai/gpt-4o-mini refused: I can't help with that; retry requested by ann"
    )
