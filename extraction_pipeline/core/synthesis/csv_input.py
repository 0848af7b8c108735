"""Reading the project's meta-analysis CSV (core/export/meta_csv.py) back into study effects.

The analyst pools what the batch exported, often after editing it in a spreadsheet, so the reader
tolerates what a spreadsheet does to a CSV (a byte-order mark, ``;`` as separator, blank cells,
spaces around numbers, empty trailing rows) and refuses, naming the line, a number it cannot read:
guessing there would change a pooled result silently.

The file has one row per outcome × arm (``group`` treatment / control), or one ``overall`` row for
an outcome reported only as an effect. A study's outcome is the rows sharing ``study``, ``outcome``
(the outcome's number in its document) and ``outcome_name``. Its effect comes from, in order:

1. events/total in both arms (``xi``/``ni``) → RR, OR or RD;
2. mean/SD/n in both arms (``mi``/``sdi``/``ni``) → MD or SMD;
3. the reported ``estimate`` with ``ci.lb``/``ci.ub`` in its ``measure`` (HR, OR, RR, RD, MD, SMD).

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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.evaluation.matching import normalize_name
from extraction_pipeline.core.export.meta_csv import REVIEWED  # the numbers ``decision_*`` columns record
from extraction_pipeline.core.synthesis.effects import (
    BINARY_MEASURES,
    CONTINUOUS_MEASURES,
    MEASURES,
    SOURCE_REPORTED,
    StudyEffect,
    binary_effect,
    continuous_effect,
    reported_effect,
)

REQUIRED = ("study", "outcome_name", "group", "xi", "ni", "mi", "sdi", "measure", "estimate", "ci.lb", "ci.ub")
NUMBERS = ("xi", "ni", "mi", "sdi", "estimate", "ci.lb", "ci.ub")
GROUPS = ("treatment", "control", "overall")
# A plain decimal number; float() would also take "nan", "inf" and "1_000", none of which is data.
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
MAX_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class StudySource:
    """Where one study's effect comes from: its document (``document_id`` column, None in a CSV
    without it), its lines, and whether every number the effect uses has a reviewer's decision
    (``decision_*`` columns; False when the CSV has none)."""

    document_id: int | None
    lines: tuple[int, ...]
    reviewed: bool


@dataclass(frozen=True)
class OutcomeGroup:
    """The studies of one outcome (as first named, or as the reviewer labelled it) in one measure,
    in file order; ``sources`` is parallel to ``effects``. ``key`` is the normalized name that
    grouped them."""

    name: str
    measure: str
    effects: tuple[StudyEffect, ...]
    sources: tuple[StudySource, ...] = ()
    key: str = ""


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


@dataclass
class _Unit:
    """One study's one outcome: its arm rows and its overall row."""

    arms: dict[str, _Row] = field(default_factory=dict)

    @property
    def rows(self) -> list[_Row]:
        return sorted(self.arms.values(), key=lambda row: row.line)

    @property
    def lines(self) -> str:
        numbers = [str(row.line) for row in self.rows]
        return f"line{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}"


def _number(text: str | None, column: str, line: int) -> float | None:
    cell = (text or "").strip()
    if not cell:
        return None
    if not NUMBER.fullmatch(cell):
        raise ConfigError(f"line {line}: {column} {cell!r} is not a number")
    return float(cell)


def _measure(text: str | None) -> str:
    return (text or "").strip().upper()


def read_meta_csv(path: Path, measure: str | None = None) -> MetaCsv:
    """Read the CSV at ``path``; ``measure`` (RR, OR, RD, MD or SMD) is what arm data are turned
    into, and only groups of that measure are returned."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if path.stat().st_size > MAX_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MB, not a batch's CSV")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text (CSV) file") from None
    try:
        return parse_meta_csv(text, measure)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _delimiter(header: str) -> str:
    # A spreadsheet in a decimal-comma locale saves with ";"; the project writes ",".
    counts = {sep: header.count(sep) for sep in (",", ";", "\t")}
    return max(counts, key=lambda sep: counts[sep]) if any(counts.values()) else ","


def parse_meta_csv(
    text: str, measure: str | None = None, *, labels: Mapping[str, str] | None = None, strict: bool = True
) -> MetaCsv:
    """The CSV's text (see ``read_meta_csv``); ``labels`` maps a normalized outcome name to the
    label a reviewer pools it under; ``strict=False`` lists a study's repeated outcome as left out
    instead of refusing the file."""
    if measure is not None and measure not in BINARY_MEASURES + CONTINUOUS_MEASURES:
        raise ConfigError(f"measure {measure!r}: one of {', '.join(BINARY_MEASURES + CONTINUOUS_MEASURES)}")
    if "\x00" in text:
        raise ConfigError("not a CSV text file (it holds NUL bytes)")
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text.split("\n", 1)[0]))
    try:
        columns = [name.strip() for name in next(reader, [])]
        missing = [name for name in REQUIRED if name not in columns]
        if missing:
            raise ConfigError(
                f"not the project's meta-analysis CSV: no column {', '.join(missing)} "
                "(a batch's meta-analysis.csv download from the web UI)"
            )
        units: dict[tuple[str, str, str], _Unit] = {}
        left_out: list[str] = []
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue  # an empty row, as spreadsheets leave at the end
            line = reader.line_num
            row = dict(zip(columns, cells, strict=False))
            group = (row.get("group") or "").strip().lower()
            if group not in GROUPS:
                raise ConfigError(f"line {line}: group {group!r} is not one of {', '.join(GROUPS)}")
            document = (row.get("document_id") or "").strip()
            parsed = _Row(
                line,
                (row.get("study") or "").strip(),
                (row.get("outcome") or "").strip(),
                (row.get("outcome_name") or "").strip(),
                (row.get("outcome_type") or "").strip().lower(),
                _measure(row.get("measure")),
                {column: _number(row.get(column), column, line) for column in NUMBERS},
                int(document) if document.isdigit() else None,
                frozenset(name for name in REVIEWED if (row.get(f"decision_{name}") or "").strip()),
            )
            key = normalize_name(parsed.name)
            if labels and key in labels:
                key = normalize_name(labels[key]) or key
            if not parsed.study or not key:
                left_out.append(f"line {line}: no study or no outcome name, so nothing to pool it with")
                continue
            # A study is its document where the CSV says which (two papers may share a label).
            study_key = f"document {parsed.document_id}" if parsed.document_id is not None else parsed.study
            unit = units.setdefault((study_key, parsed.outcome, key), _Unit())
            if group in unit.arms:
                twice = (
                    f"lines {unit.arms[group].line} and {line}: two {group} rows for study {parsed.study!r}, "
                    f"outcome {parsed.name!r}"
                )
                if strict:
                    raise ConfigError(twice)
                left_out.append(f"{twice}: line {line} left out")
                continue
            unit.arms[group] = parsed
    except csv.Error as exc:
        raise ConfigError(f"line {reader.line_num}: not readable as CSV ({exc})") from None
    return _group(units, measure, left_out, labels or {}, strict)


def _usable_effect(unit: _Unit, measure: str | None, left_out: list[str], strict: bool) -> StudyEffect | None:
    """The unit's effect; without ``strict`` a value the effect cannot use (events above the
    total, a reversed CI) leaves that study out, named, instead of refusing the whole file."""
    try:
        return _effect(unit, measure, left_out)
    except ConfigError as exc:
        if strict:
            raise
        left_out.append(f"{exc}: left out")
        return None


def _wanted_kind(unit: _Unit, events: bool, means: bool, measure: str | None) -> str | None:
    """Which data give the effect: "events", "means", or None (the reported estimate, if any)."""
    if measure is not None:
        wanted = "events" if measure in BINARY_MEASURES else "means"
        return wanted if (events if wanted == "events" else means) else None
    if events and means:
        first = unit.rows[0]
        if first.outcome_type == "continuous" or first.measure in CONTINUOUS_MEASURES:
            return "means"
        return "events"
    return "events" if events else "means" if means else None


def _effect(unit: _Unit, measure: str | None, left_out: list[str]) -> StudyEffect | None:
    first = unit.rows[0]
    treatment, control = unit.arms.get("treatment"), unit.arms.get("control")
    arms = (treatment.values, control.values) if treatment and control else None

    def has(*names: str) -> bool:
        return arms is not None and all(values[name] is not None for values in arms for name in names)

    def number(values: dict[str, float | None], name: str) -> float:
        value = values[name]
        assert value is not None  # checked by has()
        return value

    kind = _wanted_kind(unit, has("xi", "ni"), has("mi", "sdi", "ni"), measure)
    try:
        if kind is not None and arms is not None:
            t, c = arms
            if kind == "events":
                chosen = measure or (first.measure if first.measure in BINARY_MEASURES else "RR")
                return binary_effect(
                    first.study, first.name, chosen, number(t, "xi"), number(t, "ni"), number(c, "xi"), number(c, "ni")
                )
            chosen = measure or (first.measure if first.measure in CONTINUOUS_MEASURES else "MD")
            return continuous_effect(
                first.study,
                first.name,
                chosen,
                *(number(t, name) for name in ("mi", "sdi", "ni")),
                *(number(c, name) for name in ("mi", "sdi", "ni")),
            )
        reported = next(
            (row for row in unit.rows if all(row.values[n] is not None for n in ("estimate", "ci.lb", "ci.ub"))), None
        )
        if reported is None:
            left_out.append(
                f"{unit.lines}: study {first.study!r}, {first.name!r}: "
                + (
                    f"no arm data or reported estimate for {measure}"
                    if measure
                    else "neither events/totals nor means/SDs for both arms, nor an estimate with its CI"
                )
            )
            return None
        if reported.measure not in MEASURES:
            left_out.append(
                f"line {reported.line}: study {first.study!r}, {first.name!r}: "
                f"estimate without a known measure ({reported.measure or 'blank'}; one of {', '.join(MEASURES)})"
            )
            return None
        if measure is not None and reported.measure != measure:
            return None  # another measure than the one asked for: not this analysis
        estimate, lower, upper = (reported.values[n] for n in ("estimate", "ci.lb", "ci.ub"))
        assert estimate is not None and lower is not None and upper is not None
        return reported_effect(first.study, first.name, reported.measure, estimate, lower, upper)
    except ConfigError as exc:
        raise ConfigError(f"{unit.lines}: {exc}") from None


def _study_key(unit: _Unit) -> str:
    first = unit.rows[0]
    return f"document {first.document_id}" if first.document_id is not None else first.study


def _source(unit: _Unit, effect: StudyEffect) -> StudySource:
    """The study's document and lines, and whether a reviewer decided every number it uses."""
    rows = unit.rows
    if effect.source == SOURCE_REPORTED:
        columns: tuple[str, ...] = ("estimate", "ci.lb", "ci.ub")
        used = [row for row in rows if row.values["estimate"] is not None][:1]
    else:
        columns = ("xi", "ni") if effect.measure in BINARY_MEASURES else ("mi", "sdi", "ni")
        used = [row for group, row in unit.arms.items() if group != "overall"]
    reviewed = bool(used) and all(column in row.decided for row in used for column in columns)
    return StudySource(rows[0].document_id, tuple(row.line for row in rows), reviewed)


def _group(
    units: dict[tuple[str, str, str], _Unit],
    measure: str | None,
    left_out: list[str],
    labels: Mapping[str, str],
    strict: bool,
) -> MetaCsv:
    groups: dict[tuple[str, str], list[tuple[_Unit, StudyEffect]]] = {}
    for (study_key, _number_in_document, name), unit in units.items():
        effect = _usable_effect(unit, measure, left_out, strict)
        if effect is None:
            continue
        members = groups.setdefault((name, effect.measure), [])
        twice = next(((other, e) for other, e in members if _study_key(other) == study_key), None)
        if twice is not None:
            repeated = (
                f"{twice[0].lines} and {unit.lines}: study {effect.study!r} reports {twice[1].outcome!r} and "
                f"{effect.outcome!r}, one outcome once timepoints are dropped, both in {effect.measure}"
            )
            if strict:
                raise ConfigError(f"{repeated}: keep one row set per study and outcome")
            left_out.append(f"{repeated}: the first is pooled, {unit.lines} left out")
            continue
        members.append((unit, effect))
    result = []
    for (name, chosen), members in groups.items():
        effects = tuple(effect for _unit, effect in members)
        # The outcome as the reviewer labelled it, else as first named, so the study effects of
        # one group share one outcome label.
        label = next((given for given in labels.values() if normalize_name(given) == name), effects[0].outcome)
        result.append(
            OutcomeGroup(
                label,
                chosen,
                tuple(replace(e, outcome=label) for e in effects),
                tuple(_source(unit, effect) for unit, effect in members),
                name,
            )
        )
    return MetaCsv(tuple(result), tuple(left_out))
