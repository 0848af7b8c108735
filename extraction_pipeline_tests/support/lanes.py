"""How `./dev test` spreads the suite over parallel workers (pytest-xdist, `--dist loadgroup`).

Tests that run a whole batch through a daemon, a browser or a fuzz campaign (markers ``drill``,
``e2e``, ``browser``, ``fuzz``) each keep a core busy for a minute or more, and on a small machine
several of them at once slow each other down (a daemon's loops cost CPU for as long as a test
waits). They go into ``EXTRACTION_TEST_HEAVY_LANES`` lanes (default 1), each lane one worker's queue
run one test after another, balanced by an estimate per marker and handed out first; the other
workers take the quick tests meanwhile. One lane (the default) means no two of them ever run at
once: on 2 cores two daemon-driven batches side by side took 2-4 times as long each, and the
drills' timing (stale thresholds, a stop while a run starts) met conditions they never meet
alone. A module whose tests share a module-scoped fixture stays whole on one worker, so the
fixture is built once and its tests run in file order.

Why a scheduler of our own: xdist's ``loadgroup`` names a test's group by appending ``@group`` to
its node id, which pytest 9 no longer lets a plugin change (``Node.nodeid`` is read-only), so
``xdist_group`` marks are silently ignored. Here each worker writes the groups of what it collected
to a file the controller named (every worker collects the same tests in the same order), and
``LaneScheduling`` reads them: xdist's ``loadscope`` scheduling, with our groups as its scopes.
"""

from __future__ import annotations

import heapq
import json
import os
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler.loadscope import LoadScopeScheduling

WORKER_INPUT_KEY = "extraction_test_groups"
HEAVY_LANES = int(os.environ.get("EXTRACTION_TEST_HEAVY_LANES", "1"))
# Seconds a heavy test takes alone on 2 cores, about (`--durations`): only their ratios matter.
HEAVY_SECONDS = {"slow_drill": 85, "drill": 55, "fuzz": 50, "browser": 70, "e2e": 45}


def estimated_seconds(item: pytest.Item) -> int:
    return max((seconds for marker, seconds in HEAVY_SECONDS.items() if item.get_closest_marker(marker)), default=0)


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in ("module", "package") for defs in info.name2fixturedefs.values())


def _unit_of(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0] if _shares_a_module_fixture(item) else item.nodeid


def assign_groups(items: list[pytest.Item], lanes: int = HEAVY_LANES) -> dict[str, str]:
    """Each test's group (tests without one are scheduled one by one), and ``items`` reordered so
    that the heavy lanes come first. Deterministic: every worker must compute the same."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit_of(item), []).append(item)
    weight = {unit: sum(map(estimated_seconds, members)) for unit, members in units.items()}
    groups: dict[str, str] = {}
    queue = [(0, lane) for lane in range(max(1, lanes))]
    for unit in sorted((unit for unit in units if weight[unit]), key=lambda unit: (-weight[unit], unit)):
        load, lane = heapq.heappop(queue)  # the least loaded lane, the lowest number on a tie
        groups.update((item.nodeid, f"heavy-lane-{lane}") for item in units[unit])
        heapq.heappush(queue, (load + weight[unit], lane))
    for unit, members in units.items():
        if not weight[unit] and len(members) > 1:
            groups.update((item.nodeid, unit) for item in members)
    items.sort(key=lambda item: not weight[_unit_of(item)])
    return groups


def write_groups(path: Path, groups: dict[str, str]) -> None:
    """Atomically: several workers write the same content, the controller may read meanwhile."""
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    partial.replace(path)


class LaneScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the groups the workers wrote to ``path`` as scopes."""

    def __init__(self, config: pytest.Config, log: Any, path: Path) -> None:
        super().__init__(config, log)
        self._path = path
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first asked once every worker has finished collecting
            self._groups = json.loads(self._path.read_text()) if self._path.exists() else {}
        return self._groups.get(nodeid, nodeid)
