"""How the dispatcher groups pending documents into runs (core/runs/dispatch.py)."""

from extraction_pipeline.core.runs.dispatch import MIN_SPREAD_RUN, PendingDocument, plan_runs, run_key, runs_at_once


def _docs(ids: range, uid: str = "b1", dispatch_round: int = 0) -> list[PendingDocument]:
    return [PendingDocument(i, f"doc-{i}", uid, dispatch_round) for i in ids]


def _position(ids: range) -> dict[str, int]:
    return {f"doc-{i}": i for i in ids}


def test_a_large_batch_is_cut_into_runs_of_at_most_per_run_consecutive_documents() -> None:
    runs = plan_runs(_docs(range(1, 101)), _position(range(1, 101)), per_run=8, runs_at_once=5)
    assert [len(run) for run in runs] == [8] * 12 + [4]
    assert [d.item_id for run in runs for d in run] == list(range(1, 101))


def _sizes(documents: int, per_run: int, runs_at_once: int) -> list[int]:
    ids = range(1, documents + 1)
    return [len(run) for run in plan_runs(_docs(ids), _position(ids), per_run=per_run, runs_at_once=runs_at_once)]


def test_a_small_batch_is_spread_over_the_runs_started_at_once_but_never_thinner_than_the_minimum() -> None:
    assert _sizes(50, per_run=20, runs_at_once=5) == [10] * 5
    assert _sizes(20, per_run=8, runs_at_once=5) == [MIN_SPREAD_RUN] * 4  # not 5 runs of 4
    assert _sizes(2 * MIN_SPREAD_RUN - 1, per_run=20, runs_at_once=5) == [2 * MIN_SPREAD_RUN - 1]
    assert _sizes(2 * MIN_SPREAD_RUN + 1, per_run=20, runs_at_once=5) == [MIN_SPREAD_RUN + 1, MIN_SPREAD_RUN]
    assert _sizes(3, per_run=8, runs_at_once=5) == [3]  # one start-up, not three
    assert _sizes(3, per_run=1, runs_at_once=5) == [1] * 3  # the configured size still caps


def test_a_run_never_spans_a_gap_another_batch_or_another_round() -> None:
    position = _position(range(1, 40))
    ours = [d for d in _docs(range(1, 13)) if d.item_id != 5]  # doc-5 belongs to someone else
    retried = _docs(range(20, 24), dispatch_round=1)
    other = _docs(range(30, 34), uid="b2")
    runs = plan_runs([*ours, *retried, *other], position, per_run=8, runs_at_once=1)
    assert [[d.item_id for d in run] for run in runs] == [
        [1, 2, 3, 4],
        [6, 7, 8, 9, 10, 11, 12],
        [20, 21, 22, 23],
        [30, 31, 32, 33],
    ]


def test_a_document_without_a_partition_yet_runs_alone() -> None:
    runs = plan_runs(_docs(range(1, 5)), _position(range(1, 3)), per_run=8, runs_at_once=1)
    assert sorted([d.item_id for d in run] for run in runs) == [[1, 2], [3], [4]]


def test_run_keys_are_deterministic_and_differ_by_membership_and_round() -> None:
    docs = _docs(range(1, 5))
    assert run_key(docs) == run_key(list(reversed(docs)))
    assert run_key(docs) != run_key(docs[:3])
    assert run_key(docs) != run_key(_docs(range(1, 5), dispatch_round=2))
    # One document keeps the key earlier releases used (no duplicate launch after an upgrade).
    assert run_key(docs[:1]) == "b1-item-1"
    assert run_key(_docs(range(7, 8), dispatch_round=3)) == "b1-item-7-r3"


def test_a_batch_is_spread_over_no_more_runs_than_start_at_once_or_than_the_cores_working_them() -> None:
    assert runs_at_once(slots=100, analyst_limit=5, cores=16) == 5  # the analyst's run limit
    assert runs_at_once(slots=3, analyst_limit=5, cores=16) == 3  # runs beyond the pool only wait
    assert runs_at_once(slots=100, analyst_limit=None, cores=8) == 8
    assert runs_at_once(slots=100, analyst_limit=5, cores=2) == 2  # one process per core
    assert runs_at_once(slots=100, analyst_limit=5, cores=1) == 2  # never fewer than two
    assert runs_at_once(slots=100, analyst_limit=5, cores=None) == 5  # steps on other machines (Celery)
    assert runs_at_once(slots=1, analyst_limit=5, cores=2) == 1
