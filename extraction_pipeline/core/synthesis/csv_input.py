"""Reading the project's meta-analysis CSV (core/export/meta_csv.py) back into study effects.

The analyst pools what the batch exported, often after editing it in a spreadsheet, so the reader
tolerates what a spreadsheet does to a CSV (a byte-order mark, ``;`` as separator, blank cells,
spaces around numbers, empty trailing rows) and refuses, naming the line, a number it cannot read:
guessing there would change a pooled result silently.

The file has one row per outcome × arm and one per printed comparison (``comparison`` set, naming
its two arms by ``arm`` and ``comparator_arm``); a file of a version-1 batch has ``group`` treatment /
control, or one ``overall`` row for an outcome reported only as an effect. A study's outcome is the
rows sharing ``study``, ``outcome`` (the outcome's number in its document) and ``outcome_name``.

Pooling is by comparison (``core.synthesis.comparisons``): each arm is on the intervention side,
the comparator side, or not in the comparison (proposed from its name, or as the analyst assigned
it). Within each subgroup of the study, every intervention arm is compared with the comparator side
(several comparator arms are combined into one, Cochrane Handbook §6.5.2.10). When two or more
intervention arms share the comparator, its participants (and events) are split evenly between
them, so no participant counts twice (Handbook §23.3.4); the group's ``notes`` say so. Each
comparison's effect comes from, in order:

1. events/total in both sides (``xi``/``ni``) → RR, OR or RD;
2. mean/SD/n in both sides (``mi``/``sdi``/``ni``) → MD or SMD;
3. the reported ``estimate`` with ``ci.lb``/``ci.ub`` in its ``measure`` (HR, OR, RR, RD, MD, SMD),
   of a printed comparison of an intervention arm against a comparator arm (one printed the other
   way round is turned round); a second printed effect against the same comparator is left out,
   named: the two share their comparator's participants and there are no numbers to split.

Arm data come first, as in Cochrane reviews: they give every study the same measure, computed the
same way. Which measure arm data give: the one asked for (``--measure``), else the row's
``measure`` when it is one the arms can give, else RR for events and MD for means.

Studies are grouped per outcome name and measure. Names are compared after the evaluation's
normalization (``core.evaluation.matching.normalize_name``: spelling, abbreviations, timepoints
dropped), so "HbA1c at 12 weeks" and "glycated haemoglobin" are one outcome, as they are when a
batch is scored. A reviewer may pool differently named outcomes as one (``labels``: a normalized
name → the label to pool it under). Because timepoints are dropped, a study naming one outcome
twice (two timepoints) would count twice in one analysis: the command line refuses that with both
lines named; the batch page (``strict=False``) keeps the first and lists the second as left out.

Each study keeps where it came from (``StudySource``: its document, its lines, and whether a
reviewer decided every number its effect uses), so a forest plot can link a study to its review
page and draw unreviewed studies differently.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.evaluation.matching import normalize_name
from extraction_pipeline.core.export.meta_csv import REVIEWED  # the numbers ``decision_*`` columns record
from extraction_pipeline.core.synthesis.comparisons import (
    COMPARATOR,
    DEFAULT_COMPARISON,
    INTERVENTION,
    ComparisonSides,
    check_assignments,
)
from extraction_pipeline.core.synthesis.effects import (
    BINARY_MEASURES,
    CONTINUOUS_MEASURES,
    MEASURES,
    NOT_ESTIMABLE,
    StudyEffect,
    binary_effect,
    continuous_effect,
    is_ratio,
    not_estimable,
    reported_effect,
)

REQUIRED = ("study", "outcome_name", "group", "xi", "ni", "mi", "sdi", "measure", "estimate", "ci.lb", "ci.ub")
NUMBERS = ("xi", "ni", "mi", "sdi", "estimate", "ci.lb", "ci.ub")
GROUPS = ("treatment", "control", "overall")
OVERALL = "overall"
# A plain decimal number; float() would also take "nan", "inf" and "1_000", none of which is data.
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
MAX_BYTES = 50 * 1024 * 1024
HANDBOOK_SPLIT = "Cochrane Handbook §23.3.4"


EVENTS, MEANS = "events", "means"


@dataclass(frozen=True)
class ArmNumbers:
    """The arms' numbers a forest plot prints beside a study, as RevMan's data columns do: events
    and total (``EVENTS``), or mean, SD and total (``MEANS``), of the intervention side and of the
    comparator side as pooled (a shared comparator already split, several comparator arms already
    combined)."""

    kind: str
    intervention: tuple[float, ...]
    comparator: tuple[float, ...]


@dataclass(frozen=True)
class StudySource:
    """Where one study's effect comes from: its document (``document_id`` column, None in a CSV
    without it), its lines, whether every number the effect uses has a reviewer's decision
    (``decision_*`` columns; False when the CSV has none), the arms' numbers it was computed from
    (None for a printed estimate), and the names of the arms on its intervention and comparator
    sides."""

    document_id: int | None
    lines: tuple[int, ...]
    reviewed: bool
    arms: ArmNumbers | None = None
    sides: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class OutcomeGroup:
    """The studies of one outcome (as first named, or as the reviewer labelled it) in one measure,
    in file order; ``sources`` is parallel to ``effects``. ``key`` is the normalized name that
    grouped them; ``comparison`` the comparison pooled; ``notes`` what a reader of the forest plot
    must know (a comparator shared by several rows and split between them); ``not_estimable`` the
    studies with no events in either arm, drawn as RevMan draws them and not pooled (their effect is
    the continuity-corrected one, never shown)."""

    name: str
    measure: str
    effects: tuple[StudyEffect, ...]
    sources: tuple[StudySource, ...] = ()
    key: str = ""
    comparison: str = DEFAULT_COMPARISON
    notes: tuple[str, ...] = ()
    not_estimable: tuple[tuple[StudyEffect, StudySource], ...] = ()


@dataclass(frozen=True)
class MetaCsv:
    """What a CSV holds for pooling; ``left_out`` says, per line, what could not be used and why."""

    groups: tuple[OutcomeGroup, ...]
    left_out: tuple[str, ...] = ()


@dataclass
class _Row:
    line: int
    study: str
    outcome: str
    name: str
    outcome_type: str
    measure: str
    values: dict[str, float | None]
    document_id: int | None = None
    decided: frozenset[str] = frozenset()  # the number columns with a reviewer's decision
    arm: str = ""  # the arm's id (version 1: treatment / control / overall)
    arm_name: str = ""
    subgroup: str = ""
    comparator: str = ""  # a printed comparison's comparator arm id
    comparator_name: str = ""

    @property
    def arm_label(self) -> str:
        return f"{self.arm_name} ({self.subgroup})" if self.subgroup else self.arm_name


@dataclass
class _Unit:
    """One study's one outcome: its arm rows and its printed comparisons (version 1: the
    treatment, control and overall rows, each possibly carrying the effect)."""

    arms: dict[str, _Row] = field(default_factory=dict)
    printed: dict[str, _Row] = field(default_factory=dict)
    version_1: bool = False

    @property
    def rows(self) -> list[_Row]:
        return sorted([*self.arms.values(), *self.printed.values()], key=lambda row: row.line)

    @property
    def lines(self) -> str:
        return _lines(self.rows)


def _lines(rows: list[_Row]) -> str:
    numbers = [str(row.line) for row in sorted(rows, key=lambda row: row.line)]
    return f"line{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}"


@dataclass(frozen=True)
class _Contribution:
    """One row of a forest plot: an effect, the rows whose numbers it uses (and which columns)."""

    effect: StudyEffect
    rows: tuple[_Row, ...]
    columns: tuple[str, ...]
    note: str | None = None
    arms: ArmNumbers | None = None
    estimable: bool = True
    sides: tuple[str, str] = ("", "")  # the arms' names: intervention, comparator


def _number(text: str | None, column: str, line: int) -> float | None:
    cell = (text or "").strip()
    if not cell:
        return None
    if not NUMBER.fullmatch(cell):
        raise ConfigError(f"line {line}: {column} {cell!r} is not a number")
    return float(cell)


def _measure(text: str | None) -> str:
    return (text or "").strip().upper()


def read_meta_csv(path: Path, measure: str | None = None, *, comparison: ComparisonSides | None = None) -> MetaCsv:
    """Read the CSV at ``path``; ``measure`` (RR, OR, RD, MD or SMD) is what arm data are turned
    into, and only groups of that measure are returned; ``comparison`` the sides pooled (default:
    as proposed from the arm names)."""
    text = read_csv_text(path)
    try:
        return parse_meta_csv(text, measure, comparison=comparison)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def read_csv_text(path: Path) -> str:
    """The text of the CSV at ``path``, refused with the reason when it cannot be one."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.stat().st_size > MAX_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MB, not a batch's CSV")
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text (CSV) file") from None


def _delimiter(header: str) -> str:
    # A spreadsheet in a decimal-comma locale saves with ";"; the project writes ",".
    counts = {sep: header.count(sep) for sep in (",", ";", "\t")}
    return max(counts, key=lambda sep: counts[sep]) if any(counts.values()) else ","


@dataclass(frozen=True)
class StudyArmsSeen:
    """A study's arms as the CSV names them: what a mapping of sides is checked against and what
    the batch page and ``--write-arms`` list."""

    study: str
    document_id: int | None
    arms: tuple[tuple[str, str, str], ...]  # (arm id, name, subgroup), in file order


def parse_meta_csv(
    text: str,
    measure: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    strict: bool = True,
    comparison: ComparisonSides | None = None,
    keep_double_zero: bool = False,
) -> MetaCsv:
    """The CSV's text (see ``read_meta_csv``); ``labels`` maps a normalized outcome name to the
    label a reviewer pools it under; ``strict=False`` lists a study's repeated outcome as left out
    instead of refusing the file; ``comparison`` says which arms are pooled against which
    (default: the proposal from the arm names; its assignments must name the file's studies and
    arms); ``keep_double_zero`` pools a study with no events in either arm with metafor's 0.5
    continuity correction instead of leaving it out as not estimable (RevMan's rule, the default)."""
    if measure is not None and measure not in BINARY_MEASURES + CONTINUOUS_MEASURES:
        raise ConfigError(f"measure {measure!r}: one of {', '.join(BINARY_MEASURES + CONTINUOUS_MEASURES)}")
    left_out: list[str] = []
    units = _read_units(text, labels or {}, strict, left_out)
    sides = comparison or ComparisonSides(DEFAULT_COMPARISON)
    check_assignments([sides], _arms_by_study(units))
    return _group(units, measure, left_out, labels or {}, strict, sides, keep_double_zero)


def study_arms_of(text: str) -> tuple[StudyArmsSeen, ...]:
    """Each study's arms in the CSV, in file order (a study is its document where the CSV says)."""
    seen: dict[str, StudyArmsSeen] = {}
    for (study_key, _outcome, _name), unit in _read_units(text, {}, False, []).items():
        first = unit.rows[0]
        known = seen.get(study_key) or StudyArmsSeen(first.study, first.document_id, ())
        arms = list(known.arms)
        # A printed comparison names arms too: a study that reports only an effect (a hazard
        # ratio) has its arms on sides like any other.
        for row in unit.rows:
            named = [(row.arm, row.arm_name)] if row.arm != OVERALL else []
            if row.comparator:
                named.append((row.comparator, row.comparator_name))
            for arm, name in named:
                if arm and all(arm != known_arm for known_arm, _n, _s in arms):
                    arms.append((arm, name, row.subgroup))
        seen[study_key] = StudyArmsSeen(known.study, known.document_id, tuple(arms))
    return tuple(seen.values())


def _arms_by_study(units: dict[tuple[str, str, str], _Unit]) -> dict[str, dict[str, str]]:
    """Per study (its document key and its label, casefolded): its arms' id → name."""
    arms: dict[str, dict[str, str]] = {}
    for unit in units.values():
        for row in unit.rows:
            named = {row.arm: row.arm_name} if row.arm != OVERALL else {}
            if row.comparator:
                named[row.comparator] = row.comparator_name
            for key in (_study_key_of(row), row.study.casefold()):
                arms.setdefault(key, {}).update(named)
    return arms


def _study_key_of(row: _Row) -> str:
    return f"document {row.document_id}" if row.document_id is not None else row.study


NO_ARM = "a row naming no arm (neither its name nor its id), so nothing to compare it with: name it on the review page"


def _read_units(
    text: str, labels: Mapping[str, str], strict: bool, left_out: list[str]
) -> dict[tuple[str, str, str], _Unit]:
    if "\x00" in text:
        raise ConfigError("not a CSV text file (it holds NUL bytes)")
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text.split("\n", 1)[0]))
    units: dict[tuple[str, str, str], _Unit] = {}
    try:
        columns = [name.strip() for name in next(reader, [])]
        missing = [name for name in REQUIRED if name not in columns]
        if missing:
            raise ConfigError(
                f"not the project's meta-analysis CSV: no column {', '.join(missing)} "
                "(a batch's meta-analysis.csv download from the web UI)"
            )
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue  # an empty row, as spreadsheets leave at the end
            line = reader.line_num
            row = dict(zip(columns, cells, strict=False))

            def cell(name: str, row: dict[str, str] = row) -> str:
                return (row.get(name) or "").strip()

            group, arm, comparison = cell("group"), cell("arm"), cell("comparison")
            # Version 1 rows name their role in ``group`` (and repeat it, or nothing, in ``arm``).
            version_1 = group.lower() in GROUPS and arm.lower() in ("", group.lower())
            if version_1:
                group = group.lower()
            elif not group and not arm:
                if strict:
                    raise ConfigError(f"line {line}: no group (the arm's name) and no arm id")
                left_out.append(f"line {line}: {NO_ARM}")
                continue
            document = cell("document_id")
            parsed = _Row(
                line,
                cell("study"),
                cell("outcome"),
                cell("outcome_name"),
                cell("outcome_type").lower(),
                _measure(row.get("measure")),
                {column: _number(row.get(column), column, line) for column in NUMBERS},
                int(document) if document.isdigit() else None,
                frozenset(name for name in REVIEWED if (row.get(f"decision_{name}") or "").strip()),
                group if version_1 else (arm or group),
                group,
                "" if version_1 else cell("subgroup"),
                "" if version_1 else cell("comparator_arm") or cell("comparator"),
                "" if version_1 else cell("comparator") or cell("comparator_arm"),
            )
            key = normalize_name(parsed.name)
            if labels and key in labels:
                key = normalize_name(labels[key]) or key
            if not parsed.study or not key:
                left_out.append(f"line {line}: no study or no outcome name, so nothing to pool it with")
                continue
            # A study is its document where the CSV says which (two papers may share a label).
            unit = units.setdefault((_study_key_of(parsed), parsed.outcome, key), _Unit())
            unit.version_1 = unit.version_1 or version_1
            printed = bool(comparison) and not version_1
            place, name = (unit.printed, comparison) if printed else (unit.arms, parsed.arm)
            if name in place:
                what = group if version_1 else f"{'comparison' if printed else 'arm'} {name!r}"
                twice = (
                    f"lines {place[name].line} and {line}: two {what} rows for study {parsed.study!r}, "
                    f"outcome {parsed.name!r}"
                )
                if strict:
                    raise ConfigError(twice)
                left_out.append(f"{twice}: line {line} left out")
                continue
            place[name] = parsed
    except csv.Error as exc:
        raise ConfigError(f"line {reader.line_num}: not readable as CSV ({exc})") from None
    return units


def _usable(
    unit: _Unit,
    measure: str | None,
    left_out: list[str],
    strict: bool,
    sides: ComparisonSides,
    keep_double_zero: bool = False,
) -> list[_Contribution]:
    """The unit's rows of the forest plot; without ``strict`` a value an effect cannot use (events
    above the total, a reversed CI) leaves that study out, named, instead of refusing the file."""
    try:
        return _contributions(unit, measure, left_out, sides, keep_double_zero)
    except ConfigError as exc:
        if strict:
            raise
        left_out.append(f"{exc}: left out")
        return []


def _wanted_kind(unit: _Unit, events: bool, means: bool, measure: str | None) -> str | None:
    """Which data give the effect: "events", "means", or None (the reported estimate, if any)."""
    if measure is not None:
        wanted = "events" if measure in BINARY_MEASURES else "means"
        return wanted if (events if wanted == "events" else means) else None
    if events and means:
        first = unit.rows[0]
        printed = next((row.measure for row in unit.rows if row.measure), "")
        if first.outcome_type == "continuous" or printed in CONTINUOUS_MEASURES:
            return "means"
        return "events"
    return "events" if events else "means" if means else None


def _value(row: _Row, name: str) -> float:
    value = row.values[name]
    assert value is not None  # the caller checked every value it reads
    return value


def _combined(rows: list[_Row], kind: str) -> dict[str, float]:
    """Several comparator arms as one (Cochrane Handbook §6.5.2.10): events and totals added;
    means and SDs combined by the Handbook's formula."""
    if kind == "events":
        return {"xi": sum(_value(r, "xi") for r in rows), "ni": sum(_value(r, "ni") for r in rows)}
    n, mean, sd = _value(rows[0], "ni"), _value(rows[0], "mi"), _value(rows[0], "sdi")
    for row in rows[1:]:
        n2, m2, sd2 = _value(row, "ni"), _value(row, "mi"), _value(row, "sdi")
        total = n + n2
        pooled = ((n - 1) * sd**2 + (n2 - 1) * sd2**2 + n * n2 / total * (mean**2 + m2**2 - 2 * mean * m2)) / (
            total - 1
        )
        n, mean, sd = total, (n * mean + n2 * m2) / total, math.sqrt(pooled)
    return {"ni": n, "mi": mean, "sdi": sd}


def _side(unit: _Unit, sides: ComparisonSides, arm: str, name: str) -> str:
    first = unit.rows[0]
    studies = [str(first.document_id)] if first.document_id is not None else []
    return sides.side([*studies, first.study], arm, name)


def _contributions(
    unit: _Unit, measure: str | None, left_out: list[str], sides: ComparisonSides, keep_double_zero: bool = False
) -> list[_Contribution]:
    arm_rows = sorted((row for arm, row in unit.arms.items() if arm != OVERALL), key=lambda row: row.line)
    side = {row.arm: _side(unit, sides, row.arm, row.arm_name) for row in arm_rows}
    subgroups = list(dict.fromkeys(row.subgroup for row in arm_rows))
    pairs = []  # (intervention arms, comparator arms) per subgroup
    for subgroup in subgroups:
        members = [row for row in arm_rows if row.subgroup == subgroup]
        wanted = [row for row in members if side[row.arm] == INTERVENTION]
        against = [row for row in members if side[row.arm] == COMPARATOR]
        if wanted and against:
            pairs.append((wanted, against))

    def has(rows: list[_Row], *names: str) -> bool:
        return all(row.values[name] is not None for row in rows for name in names)

    everything = [row for wanted, against in pairs for row in (*wanted, *against)]
    kind = _wanted_kind(
        unit, bool(pairs) and has(everything, "xi", "ni"), bool(pairs) and has(everything, "mi", "sdi", "ni"), measure
    )
    try:
        if kind is not None:
            return _from_arms(unit, pairs, kind, measure, left_out, keep_double_zero)
        return _from_printed(unit, measure, left_out, sides, side)
    except ConfigError as exc:
        raise ConfigError(f"{unit.lines}: {exc}") from None


def _from_arms(
    unit: _Unit,
    pairs: list[tuple[list[_Row], list[_Row]]],
    kind: str,
    measure: str | None,
    left_out: list[str] | None = None,
    keep_double_zero: bool = False,
) -> list[_Contribution]:
    first = unit.rows[0]
    several = sum(len(wanted) for wanted, _against in pairs) > 1
    contributions = []
    for wanted, against in pairs:
        comparator = _combined(against, kind)
        share = len(wanted)  # intervention arms sharing this comparator
        names = " + ".join(row.arm_name for row in against)
        note = None
        if share > 1:
            n = comparator["ni"]
            what = f"n {n:g}" + (f", {comparator['xi']:g} events" if kind == "events" else "")
            note = (
                f"{first.study}: {names} ({what}) is the comparator of {share} arms "
                f"({', '.join(row.arm_label for row in wanted)}); its participants"
                + (" and events are" if kind == "events" else " are")
                + f" split evenly between them ({HANDBOOK_SPLIT})"
            )
            comparator = {**comparator, "ni": comparator["ni"] / share}
            if kind == "events":
                comparator["xi"] = comparator["xi"] / share
        comparator_name = " + ".join(row.arm_name for row in against)  # a subgroup is no side's name
        for row in wanted:
            label = f"{first.study}: {row.arm_label}" if several and not unit.version_1 else first.study
            estimable = True
            if kind == "events":
                chosen = measure or next((r.measure for r in unit.rows if r.measure in BINARY_MEASURES), "RR")
                events = (_value(row, "xi"), _value(row, "ni"), comparator["xi"], comparator["ni"])
                if not keep_double_zero and not_estimable(chosen, *events):
                    if left_out is not None:
                        left_out.append(
                            f"{unit.lines}: study {label!r}, {first.name!r}: {events[0]:g}/{events[1]:g} vs "
                            f"{events[2]:g}/{events[3]:g}, {NOT_ESTIMABLE} as an {chosen}: left out of the pooling"
                        )
                    estimable = False  # drawn as "not estimable", never pooled
                effect = binary_effect(
                    label, first.name, chosen, _value(row, "xi"), _value(row, "ni"), comparator["xi"], comparator["ni"]
                )
                columns: tuple[str, ...] = ("xi", "ni")
                numbers = ArmNumbers(EVENTS, events[:2], events[2:])
            else:
                chosen = measure or next((r.measure for r in unit.rows if r.measure in CONTINUOUS_MEASURES), "MD")
                effect = continuous_effect(
                    label,
                    first.name,
                    chosen,
                    _value(row, "mi"),
                    _value(row, "sdi"),
                    _value(row, "ni"),
                    comparator["mi"],
                    comparator["sdi"],
                    comparator["ni"],
                )
                columns = ("mi", "sdi", "ni")
                numbers = ArmNumbers(
                    MEANS,
                    (_value(row, "mi"), _value(row, "sdi"), _value(row, "ni")),
                    (comparator["mi"], comparator["sdi"], comparator["ni"]),
                )
            sides = (row.arm_name, comparator_name)
            contributions.append(_Contribution(effect, (row, *against), columns, note, numbers, estimable, sides))
    return contributions


def _reversed(measure: str, estimate: float, lower: float, upper: float) -> tuple[float, float, float]:
    """An effect of A vs B as B vs A: a ratio inverted, a difference negated."""
    if is_ratio(measure):
        return 1 / estimate, 1 / upper, 1 / lower
    return -estimate, -upper, -lower


def _from_printed(
    unit: _Unit, measure: str | None, left_out: list[str], sides: ComparisonSides, side: dict[str, str]
) -> list[_Contribution]:
    """The printed effects of the unit's comparisons of an intervention arm with a comparator arm
    (version 1: the outcome's one effect)."""
    first = unit.rows[0]
    complete = ("estimate", "ci.lb", "ci.ub")
    candidates: list[tuple[_Row, bool]] = []  # (row, turned round)
    if unit.version_1:
        reported = next((row for row in unit.rows if all(row.values[n] is not None for n in complete)), None)
        if reported is not None:
            candidates.append((reported, False))
    else:
        for row in sorted(unit.printed.values(), key=lambda row: row.line):
            if not all(row.values[n] is not None for n in complete):
                continue
            mine = _side(unit, sides, row.arm, row.arm_name)
            theirs = _side(unit, sides, row.comparator, row.comparator_name)
            if (mine, theirs) == (INTERVENTION, COMPARATOR):
                candidates.append((row, False))
            elif (mine, theirs) == (COMPARATOR, INTERVENTION):
                candidates.append((row, True))
    if not candidates:
        if unit.version_1 or any(s == INTERVENTION for s in side.values()) or unit.printed:
            wanted = (
                f"no arm data or reported estimate for {measure}"
                if measure
                else "neither events/totals nor means/SDs for both arms, nor an estimate with its CI"
            )
            if not unit.version_1:
                shown = ", ".join(f"{row.arm_label}: {side[row.arm]}" for row in unit.arms.values() if row.arm in side)
                wanted += f" in {sides.name!r} (arms: {shown or 'none with numbers'})"
            left_out.append(f"{unit.lines}: study {first.study!r}, {first.name!r}: {wanted}")
        return []
    contributions = []
    used_comparators: dict[str, _Row] = {}
    for row, turned in candidates:
        if row.measure not in MEASURES:
            left_out.append(
                f"line {row.line}: study {first.study!r}, {first.name!r}: "
                f"estimate without a known measure ({row.measure or 'blank'}; one of {', '.join(MEASURES)})"
            )
            continue
        if measure is not None and row.measure != measure:
            continue  # another measure than the one asked for: not this analysis
        comparator = row.arm if turned else row.comparator
        if comparator and comparator in used_comparators:
            left_out.append(
                f"line {row.line}: study {first.study!r}, {first.name!r}: a second printed effect against "
                f"{row.arm_name if turned else row.comparator_name} (the first is line "
                f"{used_comparators[comparator].line}); the two share the comparator's participants and "
                f"without its numbers they cannot be split ({HANDBOOK_SPLIT}): left out"
            )
            continue
        used_comparators[comparator] = row
        estimate, lower, upper = (_value(row, n) for n in complete)
        if turned:
            estimate, lower, upper = _reversed(row.measure, estimate, lower, upper)
        arm = row.comparator_name if turned else row.arm_name
        label = first.study if unit.version_1 or len(candidates) == 1 else f"{first.study}: {arm}"
        effect = reported_effect(label, first.name, row.measure, estimate, lower, upper)
        names = (row.comparator_name, row.arm_name) if turned else (row.arm_name, row.comparator_name)
        if unit.version_1:
            names = ("", "")  # an "overall" row names no arm: the sides are said by their roles
        contributions.append(_Contribution(effect, (row,), complete, sides=names))
    return contributions


def _group(
    units: dict[tuple[str, str, str], _Unit],
    measure: str | None,
    left_out: list[str],
    labels: Mapping[str, str],
    strict: bool,
    sides: ComparisonSides,
    keep_double_zero: bool = False,
) -> MetaCsv:
    groups: dict[tuple[str, str], list[tuple[_Unit, _Contribution]]] = {}
    excluded: dict[tuple[str, str], list[tuple[_Unit, _Contribution]]] = {}
    for (study_key, _number_in_document, name), unit in units.items():
        for contribution in _usable(unit, measure, left_out, strict, sides, keep_double_zero):
            effect = contribution.effect
            if not contribution.estimable:
                excluded.setdefault((name, effect.measure), []).append((unit, contribution))
                continue
            members = groups.setdefault((name, effect.measure), [])
            twice = next(
                ((other, c) for other, c in members if _study_key_of(other.rows[0]) == study_key and other is not unit),
                None,
            )
            if twice is not None:
                repeated = (
                    f"{twice[0].lines} and {unit.lines}: study {unit.rows[0].study!r} reports "
                    f"{twice[1].effect.outcome!r} and {effect.outcome!r}, one outcome once timepoints are dropped, "
                    f"both in {effect.measure}"
                )
                if strict:
                    raise ConfigError(f"{repeated}: keep one row set per study and outcome")
                left_out.append(f"{repeated}: the first is pooled, {unit.lines} left out")
                break
            members.append((unit, contribution))
    result = []
    for (name, chosen), members in groups.items():
        effects = tuple(contribution.effect for _unit, contribution in members)
        # The outcome as the reviewer labelled it, else as first named, so the study effects of
        # one group share one outcome label.
        label = next((given for given in labels.values() if normalize_name(given) == name), effects[0].outcome)
        result.append(
            OutcomeGroup(
                label,
                chosen,
                tuple(replace(e, outcome=label) for e in effects),
                tuple(_source(unit, contribution) for unit, contribution in members),
                name,
                sides.name,
                tuple(dict.fromkeys(c.note for _unit, c in members if c.note)),
                tuple(
                    (replace(c.effect, outcome=label), _source(unit, c)) for unit, c in excluded.get((name, chosen), [])
                ),
            )
        )
    return MetaCsv(tuple(result), tuple(left_out))


def _source(unit: _Unit, contribution: _Contribution) -> StudySource:
    """The study's document and lines (the rows it uses; version 1: the outcome's rows), and
    whether a reviewer decided every number it uses."""
    rows = contribution.rows
    reviewed = bool(rows) and all(column in row.decided for row in rows for column in contribution.columns)
    lines = unit.rows if unit.version_1 else sorted(rows, key=lambda row: row.line)
    return StudySource(
        rows[0].document_id, tuple(row.line for row in lines), reviewed, contribution.arms, contribution.sides
    )
