"""How `./dev test` spreads the suite over parallel workers (pytest-xdist, `--dist loadgroup`).

Tests that run a whole batch through a daemon, a browser or a fuzz campaign (markers ``drill``,
``e2e``, ``browser``, ``fuzz``) each keep a core busy for a minute or more. They go into
``EXTRACTION_TEST_HEAVY_LANES`` lanes (default 2), each lane one worker's queue run one test after
another, handed out first; the other workers take the quick tests meanwhile. The fault drills
(``drill``) have a lane of their own: they check timing rules (stale thresholds, a stop while a run
starts, an outage several retries long) and two of them at once met conditions they never meet
alone. The other heavy tests are balanced over the remaining lanes by an estimate per marker. With
one lane, every heavy test waits for the one before it: on 2 cores that left one core idle for the
last third of CI (the quick tests done after 18 minutes, the lane after 39). A module whose tests
share a module-scoped fixture stays whole on one worker, so the fixture is built once and its
tests run in file order.

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
HEAVY_LANES = int(os.environ.get("EXTRACTION_TEST_HEAVY_LANES", "2"))
DRILL_MARKERS = ("drill", "slow_drill")
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


def _is_drill(members: list[pytest.Item]) -> bool:
    return any(item.get_closest_marker(marker) for item in members for marker in DRILL_MARKERS)


def assign_groups(items: list[pytest.Item], lanes: int = HEAVY_LANES) -> dict[str, str]:
    """Each test's group (tests without one are scheduled one by one), and ``items`` reordered so
    that the heavy lanes come first. Deterministic: every worker must compute the same."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit_of(item), []).append(item)
    weight = {unit: sum(map(estimated_seconds, members)) for unit, members in units.items()}
    groups: dict[str, str] = {}
    lanes = max(1, lanes)
    # With two lanes or more, lane 0 is the drills' own; the rest share the others, least loaded first.
    shared = [(0, lane) for lane in range(1 if lanes > 1 else 0, lanes)]
    for unit in sorted((unit for unit in units if weight[unit]), key=lambda unit: (-weight[unit], unit)):
        if lanes > 1 and _is_drill(units[unit]):
            lane = 0
        else:
            load, lane = heapq.heappop(shared)  # the least loaded lane, the lowest number on a tie
            heapq.heappush(shared, (load + weight[unit], lane))
        groups.update((item.nodeid, f"heavy-lane-{lane}") for item in units[unit])
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
