"""How many runs the dispatcher spreads a batch over, read from the instance's run queue."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.defs import sensors
from extraction_pipeline.defs.llm_slots import LLM_POOL
from extraction_pipeline.defs.resources import PipelineSettingsResource
from extraction_pipeline.defs.run_queue import analyst_run_limit
from extraction_pipeline.defs.sensors import RUNS_PER_TICK, batch_dispatcher
from extraction_pipeline_tests.support.dagster_runs import register_trials, resources_for
from extraction_pipeline_tests.support.ledgers import add_documents

REPO = Path(__file__).resolve().parents[2]


def _runs(max_concurrent: int, *tag_limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "concurrency": {"runs": {"max_concurrent_runs": max_concurrent, "tag_concurrency_limits": list(tag_limits)}}
    }


PER_ANALYST = {"key": "extraction/user", "value": {"applyLimitPerUniqueValue": True}}


def test_the_projects_instance_gives_an_analyst_five_runs(tmp_path: Path) -> None:
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert analyst_run_limit(instance) == 5


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (_runs(10, {**PER_ANALYST, "limit": 3}), 3),
        (_runs(2, {**PER_ANALYST, "limit": 5}), 2),  # the whole queue is smaller
        (_runs(10, {"key": "extraction/user", "limit": 4}), 4),  # all analysts together
        (_runs(10, {"key": "extraction/user", "value": "alice", "limit": 1}), 10),  # only alice's
        (_runs(10, {"key": "other/tag", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}), 10),
        (_runs(-1), 0),  # no limit at all
    ],
)
def test_the_limit_is_the_lowest_that_binds_every_analyst(overrides: dict[str, Any], expected: int) -> None:
    with dg.instance_for_test(overrides=overrides) as instance:
        assert analyst_run_limit(instance) == expected


@pytest.fixture(autouse=True)
def sixteen_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's cores, a fact of the host (this one has 2): these tests are about the queue."""
    monkeypatch.setattr(sensors, "usable_cores", lambda: 16)


def _run_sizes(ledger: Ledger, home: Path, *, pool: int, ticks: int = 1) -> list[int]:
    """The documents of each run the dispatcher requests over ``ticks`` ticks, five runs per
    analyst, an `llm` pool of ``pool``."""
    sizes: list[int] = []
    cursor = None
    with dg.instance_for_test(overrides=_runs(10, {**PER_ANALYST, "limit": 5})) as instance:
        instance.event_log_storage.set_concurrency_slots(LLM_POOL, pool)
        for _ in range(ticks):
            context = dg.build_sensor_context(instance=instance, resources=resources_for(ledger, home), cursor=cursor)
            result = batch_dispatcher(context)
            assert isinstance(result, dg.SensorResult)
            sizes += [len(request.tags["extraction/documents"].split(",")) for request in result.run_requests or []]
            cursor = result.cursor or cursor
    return sizes


def test_a_batch_is_spread_over_no_more_runs_than_the_queue_starts_at_once(home_ledger: Ledger, home: Path) -> None:
    """A pool of 50 with five runs per analyst: 40 documents in 5 runs of 8 (not 40 runs of 1,
    of which five would run at a time, each paying its own start-up)."""
    doc_ids = register_trials(home_ledger, home, 40)
    create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    assert _run_sizes(home_ledger, home, pool=50) == [8] * 5


def test_a_small_pool_still_spreads_over_its_slots(home_ledger: Ledger, home: Path) -> None:
    doc_ids = register_trials(home_ledger, home, 15)
    create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    assert _run_sizes(home_ledger, home, pool=3) == [5] * 3


def test_on_two_cores_a_batch_is_spread_over_two_runs(
    home_ledger: Ledger, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's process works on one core at a time: a third run on 2 cores would only add its
    start-up to their work."""
    monkeypatch.setattr(sensors, "usable_cores", lambda: 2)
    doc_ids = add_documents(home_ledger, 500)
    create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    assert _run_sizes(home_ledger, home, pool=100) == [250] * 2


def test_a_large_batch_is_planned_whole_so_its_runs_all_start_at_once(home_ledger: Ledger, home: Path) -> None:
    """500 documents, five runs per analyst, a pool of 100: five runs of 100 in one tick, every
    document in a run that starts at once (read 200 at a time they were three waves of runs, each
    wave waiting for the last to end while the pool idled)."""
    doc_ids = add_documents(home_ledger, 500)  # records only: the dispatcher never opens the PDFs
    create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    assert _run_sizes(home_ledger, home, pool=100, ticks=2) == [100] * 5  # nothing left for a second wave


def test_many_small_runs_go_over_several_ticks_each_document_once(home_ledger: Ledger, home: Path) -> None:
    """Runs of one document (EXTRACTION_DOCUMENTS_PER_RUN=1): a tick requests at most
    RUNS_PER_TICK runs (the daemon pays for each), the next tick the rest; no document twice."""
    doc_ids = add_documents(home_ledger, RUNS_PER_TICK + 30)
    create_batch(home_ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    resources = {
        **resources_for(home_ledger, home),
        "settings": PipelineSettingsResource(home=str(home), documents_per_run=1),
    }
    seen: list[str] = []
    cursor = None
    with dg.instance_for_test(overrides=_runs(10, {**PER_ANALYST, "limit": 5})) as instance:
        for expected in (RUNS_PER_TICK, 30, 0):
            result = batch_dispatcher(dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor))
            assert isinstance(result, dg.SensorResult)
            requests = result.run_requests or []
            assert len(requests) == expected
            seen += [request.partition_key or "" for request in requests]
            cursor = result.cursor or cursor
    assert len(seen) == len(set(seen)) == RUNS_PER_TICK + 30
