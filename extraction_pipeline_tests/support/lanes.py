"""How `./dev test` spreads the suite over parallel workers (pytest-xdist, `--dist loadgroup`).

Tests that run a whole batch through a daemon, a browser or a fuzz campaign (markers ``drill``,
``e2e``, ``browser``, ``fuzz``) each keep a core busy for a minute or more, and on a small machine
several of them at once slow each other down (a daemon's loops cost CPU for as long as a test
waits). The rule, measured on 2 cores:

- While quick tests are left, at most ``EXTRACTION_TEST_HEAVY_LANES`` heavy tests (default 1) run
  at once: the other workers take quick tests meanwhile. Two daemon-driven batches side by side
  took 2-4 times as long each, and the drills' timing (stale thresholds, a stop while a run
  starts) met conditions they never meet alone.
- Once every quick test is handed out, a worker would otherwise sit idle while one heavy test runs
  at a time: then up to ``EXTRACTION_TEST_HEAVY_LANES_AT_END`` (default 2) run at once, but a
  fault drill (``drill``) still only alone, for the same timing reasons.
- Heavy tests are handed out longest first, drills before the others (so the drills run while
  quick tests still fill the other workers, and what pairs up at the end is what may).

A module whose tests share a module-scoped fixture stays whole on one worker (one unit), so the
fixture is built once and its tests run in file order.

Why a scheduler of our own: xdist's ``loadgroup`` names a test's group by appending ``@group`` to
its node id, which pytest 9 no longer lets a plugin change (``Node.nodeid`` is read-only), so
``xdist_group`` marks are silently ignored. Here each worker writes the groups of what it collected
to a file the controller named (every worker collects the same tests in the same order), and
``LaneScheduling`` reads them: xdist's ``loadscope`` scheduling, with our groups as its scopes and
our choice of which scope a worker gets next.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler.loadscope import LoadScopeScheduling

WORKER_INPUT_KEY = "extraction_test_groups"
HEAVY_LANES = int(os.environ.get("EXTRACTION_TEST_HEAVY_LANES", "1"))
HEAVY_LANES_AT_END = int(os.environ.get("EXTRACTION_TEST_HEAVY_LANES_AT_END", "2"))
# Seconds a heavy test takes alone on 2 cores, about (`--durations`): only their ratios matter.
HEAVY_SECONDS = {"slow_drill": 85, "drill": 55, "fuzz": 50, "browser": 70, "e2e": 45}
HEAVY = "heavy"  # a group name's first part: heavy/<kind>/<unit>
DRILL, OTHER = "drill", "other"


def estimated_seconds(item: pytest.Item) -> int:
    return max((seconds for marker, seconds in HEAVY_SECONDS.items() if item.get_closest_marker(marker)), default=0)


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in ("module", "package") for defs in info.name2fixturedefs.values())


def _unit_of(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0] if _shares_a_module_fixture(item) else item.nodeid


def assign_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each test's group (tests without one are scheduled one by one), and ``items`` reordered:
    heavy units first, drills before the others, longest first. Deterministic: every worker must
    compute the same."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit_of(item), []).append(item)
    weight = {unit: sum(map(estimated_seconds, members)) for unit, members in units.items()}
    kind = {
        unit: DRILL if any(item.get_closest_marker("drill") for item in members) else OTHER
        for unit, members in units.items()
    }
    groups: dict[str, str] = {}
    for unit, members in units.items():
        if weight[unit]:
            groups.update((item.nodeid, f"{HEAVY}/{kind[unit]}/{unit}") for item in members)
        elif len(members) > 1:
            groups.update((item.nodeid, unit) for item in members)

    def order(item: pytest.Item) -> tuple[bool, bool, int, str]:
        unit = _unit_of(item)
        return (not weight[unit], kind[unit] != DRILL, -weight[unit], unit)

    items.sort(key=order)  # stable: a unit's tests keep their file order
    return groups


def write_groups(path: Path, groups: dict[str, str]) -> None:
    """Atomically: several workers write the same content, the controller may read meanwhile."""
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    partial.replace(path)


def is_heavy(scope: str) -> bool:
    return scope.startswith(f"{HEAVY}/")


def is_drill(scope: str) -> bool:
    return scope.startswith(f"{HEAVY}/{DRILL}/")


def next_scope(
    queue: list[str],
    mine: list[str],
    others: list[list[str]],
    lanes: int = HEAVY_LANES,
    at_end: int = HEAVY_LANES_AT_END,
) -> str | None:
    """Which queued scope a worker gets next, or None (it waits for a heavy one to finish).

    ``queue``: the scopes not handed out yet, in order; ``mine``: the unfinished scopes this worker
    holds; ``others``: those of each other worker."""
    if any(map(is_heavy, mine)):
        # Nothing queued behind a heavy test: what would wait there could run elsewhere (a worker
        # asks again the moment its heavy test ends, so its lane goes on without a gap).
        return None
    busy = [held for held in others if any(map(is_heavy, held))]  # other workers in a heavy test
    heavy = [scope for scope in queue if is_heavy(scope)]
    quick = [scope for scope in queue if not is_heavy(scope)]
    if heavy:
        nxt = heavy[0]
        if quick:  # quick tests left: at most `lanes` heavy tests at once
            if len(busy) < lanes:
                return nxt
        elif is_drill(nxt):  # a drill runs alone
            if not busy:
                return nxt
        elif len(busy) + 1 <= at_end and not any(is_drill(scope) for held in busy for scope in held):
            return nxt
    return quick[0] if quick else None


class LaneScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the groups the workers wrote to ``path`` as scopes, and
    ``next_scope`` choosing what each worker gets."""

    def __init__(self, config: pytest.Config, log: Any, path: Path) -> None:
        super().__init__(config, log)
        self._path = path
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first asked once every worker has finished collecting
            self._groups = json.loads(self._path.read_text()) if self._path.exists() else {}
        return self._groups.get(nodeid, nodeid)

    def _unfinished(self, node: Any) -> list[str]:
        return [scope for scope, tests in self.assigned_work.get(node, {}).items() if not all(tests.values())]

    def _assign_work_unit(self, node: Any) -> None:
        others = [self._unfinished(other) for other in self.assigned_work if other is not node]
        scope = next_scope(list(self.workqueue), self._unfinished(node), others)
        if scope is None:
            return  # idle until a heavy test elsewhere finishes (mark_test_complete asks again)
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        for other in list(self.assigned_work):  # a heavy test's end may let an idle worker go on
            if other is not node and not other.shutting_down and self._pending_of(self.assigned_work[other]) == 0:
                self._reschedule(other)
