"""The parallel schedule of `./dev test` (support/lanes.py): heavy tests one at a time while quick
ones are left, then two at once but a drill alone; a module's tests that share a module-scoped
fixture kept together; quick tests handed out one by one; drills first, then the longest."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from xdist.scheduler import loadscope

from extraction_pipeline_tests.support.lanes import LaneScheduling, assign_groups, next_scope


@dataclass
class _Definition:
    scope: str


@dataclass
class _FixtureInfo:
    name2fixturedefs: dict[str, list[_Definition]]


@dataclass
class _Item:
    """What the schedule reads of a collected test: its id, markers and fixtures' scopes."""

    nodeid: str
    markers: tuple[str, ...] = ()
    fixtures: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._fixtureinfo = _FixtureInfo({name: [_Definition(scope)] for name, scope in self.fixtures.items()})

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.markers else None


def _items(*items: _Item) -> list[pytest.Item]:
    return cast("list[pytest.Item]", list(items))


def test_heavy_tests_come_first_drills_before_the_others_and_each_is_a_unit_of_its_own() -> None:
    items = _items(
        _Item("core/test_a.py::quick"),
        _Item("e2e/test_e.py::four", ("e2e",)),
        _Item("drills/test_d.py::three", ("drill",)),
        _Item("drills/test_d.py::one", ("drill", "slow_drill")),
        _Item("web/test_b.py::browser", ("browser",)),
    )
    groups = assign_groups(items)
    assert groups == {
        "e2e/test_e.py::four": "heavy/other/e2e/test_e.py::four",
        "drills/test_d.py::three": "heavy/drill/drills/test_d.py::three",
        "drills/test_d.py::one": "heavy/drill/drills/test_d.py::one",
        "web/test_b.py::browser": "heavy/other/web/test_b.py::browser",
    }
    assert [item.nodeid for item in items] == [
        "drills/test_d.py::one",  # a slow drill, the longest drill
        "drills/test_d.py::three",
        "web/test_b.py::browser",  # then the others, longest first
        "e2e/test_e.py::four",
        "core/test_a.py::quick",
    ]


def test_a_module_fixture_keeps_its_tests_together_and_a_heavy_one_makes_them_one_heavy_unit() -> None:
    items = _items(
        _Item("cli/test_c.py::first", fixtures={"home": "module", "tmp_path": "function"}),
        _Item("cli/test_c.py::second", fixtures={"home": "module"}),
        _Item("cli/test_c.py::alone", fixtures={"tmp_path": "function"}),
        _Item("web/test_g.py::one", ("e2e",), {"ui": "module"}),
        _Item("web/test_g.py::two", fixtures={"ui": "module"}),
    )
    groups = assign_groups(items)
    assert groups["cli/test_c.py::first"] == groups["cli/test_c.py::second"] == "cli/test_c.py"
    assert "cli/test_c.py::alone" not in groups  # handed out on its own
    assert groups["web/test_g.py::one"] == groups["web/test_g.py::two"] == "heavy/other/web/test_g.py"
    assert [item.nodeid for item in items][:2] == ["web/test_g.py::one", "web/test_g.py::two"]


def test_every_worker_computes_the_same_schedule() -> None:
    def collected() -> list[pytest.Item]:
        return _items(*(_Item(f"drills/test_d.py::t{n}", ("drill",)) for n in range(7)))

    first, second = collected(), collected()
    assert assign_groups(first) == assign_groups(second)
    assert [item.nodeid for item in first] == [item.nodeid for item in second]


DRILL_1, DRILL_2 = "heavy/drill/d.py::one", "heavy/drill/d.py::two"
E2E_1, E2E_2, E2E_3 = "heavy/other/e.py::one", "heavy/other/e.py::two", "heavy/other/e.py::three"


def test_while_quick_tests_are_left_one_heavy_test_runs_at_a_time_and_none_waits_behind_it() -> None:
    queue = [DRILL_2, E2E_1, "core/q.py::a", "core/q.py::b"]
    assert next_scope(queue, mine=[], others=[[], []]) == DRILL_2  # nothing heavy running: a heavy one
    assert next_scope(queue, mine=[], others=[[DRILL_1], []]) == "core/q.py::a"  # one runs: quick ones
    assert next_scope(queue, mine=[], others=[[], ["core/q.py::c"]]) == DRILL_2  # the lane goes on
    assert next_scope(queue, mine=[DRILL_1], others=[[], []]) is None  # nothing queued behind a heavy test
    assert next_scope(queue, mine=[], others=[[DRILL_1], []], lanes=2) == DRILL_2  # two lanes if asked


def test_once_quick_tests_are_gone_two_heavy_tests_run_at_once_but_a_drill_alone() -> None:
    assert next_scope([E2E_2], mine=[], others=[[E2E_1], []]) == E2E_2  # idle otherwise: pair up
    assert next_scope([E2E_3], mine=[], others=[[E2E_1], [E2E_2]]) is None  # at most two
    assert next_scope([E2E_3], mine=[], others=[[E2E_1], [E2E_2]], at_end=3) == E2E_3
    assert next_scope([E2E_2], mine=[], others=[[DRILL_1], []]) is None  # nothing beside a drill
    assert next_scope([DRILL_2], mine=[], others=[[E2E_1], []]) is None  # a drill waits to run alone
    assert next_scope([DRILL_2], mine=[], others=[[], []]) == DRILL_2
    assert next_scope([], mine=[], others=[[E2E_1]]) is None  # nothing left: the worker is done


class _Worker:
    """What the scheduler sees of an xdist worker: it is sent test indexes and may be shut down."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_scheduler_pairs_heavy_tests_only_at_the_end_and_never_queues_work_behind_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = ["d.py::one", "d.py::two", "e.py::a", "e.py::b", "j.py::one", "q.py::1", "q.py::2", "q.py::3"]
    groups = {"d.py::one": DRILL_1, "d.py::two": DRILL_2, "e.py::a": E2E_1, "e.py::b": E2E_1, "j.py::one": E2E_2}
    (tmp_path / "groups.json").write_text(json.dumps(groups))
    monkeypatch.setattr(loadscope, "parse_tx_spec_config", lambda config: ["popen"] * 3)
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=False))
    schedule = LaneScheduling(cast("pytest.Config", config), None, tmp_path / "groups.json")
    workers = [_Worker(f"gw{n}") for n in range(3)]
    for worker in workers:
        schedule.add_node(cast("Any", worker))
        schedule.add_node_collection(cast("Any", worker), collection)
    schedule.schedule()

    def sent(worker: _Worker) -> list[str]:
        return [collection[index] for index in worker.sent]

    gw0, gw1, gw2 = workers
    assert sent(gw0) == ["d.py::one"]  # a heavy test, and nothing behind it
    assert "d.py::two" not in sent(gw1) + sent(gw2)  # one heavy test while quick ones are left
    done: set[tuple[str, int]] = set()
    for _ in range(10):  # each worker finishes one test a round
        for worker in workers:
            waiting = [index for index in worker.sent if (worker.gateway.id, index) not in done]
            if waiting:
                done.add((worker.gateway.id, waiting[0]))
                schedule.mark_test_complete(cast("Any", worker), waiting[0])
    heavy_elsewhere = {w.gateway.id for w in workers for test in sent(w) if test.startswith(("e.py", "j.py"))}
    assert len(heavy_elsewhere) == 2  # the two non-drill units ran side by side at the end
    assert schedule.tests_finished
    assert sorted(test for worker in workers for test in sent(worker)) == sorted(collection)
