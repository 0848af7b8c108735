"""The parallel schedule of `./dev test` (support/lanes.py): the drills in a lane of their own,
the other heavy tests spread over the other lanes, longest first; a module's tests that share a
module-scoped fixture kept together; quick tests left to be handed out one by one; the heavy ones
first in the order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from extraction_pipeline_tests.support.lanes import assign_groups


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


def test_drills_keep_a_lane_of_their_own_the_other_heavy_tests_are_spread_longest_first() -> None:
    items = _items(
        _Item("core/test_a.py::quick"),
        _Item("drills/test_d.py::one", ("drill", "slow_drill")),
        _Item("drills/test_d.py::two", ("drill", "slow_drill")),
        _Item("e2e/test_e.py::three", ("e2e",)),
        _Item("drills/test_f.py::fuzz", ("fuzz",)),
        _Item("e2e/test_j.py::journey", ("browser", "e2e")),
    )
    groups = assign_groups(items, lanes=3)
    assert groups == {
        "drills/test_d.py::one": "heavy-lane-0",
        "drills/test_d.py::two": "heavy-lane-0",
        "e2e/test_j.py::journey": "heavy-lane-1",  # the longest estimate first, into the first shared lane
        "drills/test_f.py::fuzz": "heavy-lane-2",
        "e2e/test_e.py::three": "heavy-lane-2",
    }
    assert [item.nodeid for item in items][-1] == "core/test_a.py::quick"  # the lanes are handed out first


def test_with_one_lane_every_heavy_test_shares_it() -> None:
    items = _items(_Item("drills/test_d.py::one", ("drill",)), _Item("e2e/test_e.py::two", ("e2e",)))
    assert set(assign_groups(items, lanes=1).values()) == {"heavy-lane-0"}


def test_a_module_fixture_keeps_its_tests_together_and_a_heavy_one_takes_them_into_its_lane() -> None:
    items = _items(
        _Item("cli/test_c.py::first", fixtures={"home": "module", "tmp_path": "function"}),
        _Item("cli/test_c.py::second", fixtures={"home": "module"}),
        _Item("cli/test_c.py::alone", fixtures={"tmp_path": "function"}),
        _Item("web/test_g.py::one", ("e2e",), {"ui": "module"}),
        _Item("web/test_g.py::two", fixtures={"ui": "module"}),
    )
    groups = assign_groups(items, lanes=1)
    assert groups["cli/test_c.py::first"] == groups["cli/test_c.py::second"] == "cli/test_c.py"
    assert "cli/test_c.py::alone" not in groups  # handed out on its own
    assert groups["web/test_g.py::one"] == groups["web/test_g.py::two"] == "heavy-lane-0"
    assert [item.nodeid for item in items][:2] == ["web/test_g.py::one", "web/test_g.py::two"]


def test_every_worker_computes_the_same_schedule() -> None:
    def collected() -> list[pytest.Item]:
        return _items(*(_Item(f"drills/test_d.py::t{n}", ("drill",)) for n in range(7)))

    first, second = collected(), collected()
    assert assign_groups(first) == assign_groups(second)
    assert [item.nodeid for item in first] == [item.nodeid for item in second]
