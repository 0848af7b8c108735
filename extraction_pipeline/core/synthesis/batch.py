"""A batch's meta-analysis as the batch page and the workbook show it: per outcome, its studies and
their pooled estimates, from the same CSV an analyst downloads.

The batch's meta-analysis CSV (``core.export.meta_csv``) holds the final values: a reviewer's
correction replaces the machine's number, "not reported" empties it. Pooling goes through that
text and ``parse_meta_csv``, so what the page draws is what ``extraction-pipeline synthesis`` prints
for the downloaded file. Outcomes are grouped by name the way ``evaluate`` matches them, and a
reviewer may pool differently named outcomes as one (``set_outcome_label``); those labels are
appended to the ledger, the latest per name holds.

Pooling is one comparison at a time (``core.synthesis.comparisons``): the proposed one
("intervention vs comparator", every arm on the side its name suggests) and each comparison the
analyst named on the batch page, with the sides assigned there (``core.ledger.arm_sides``).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from sqlalchemy import insert, select

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.evaluation.matching import normalize_name
from extraction_pipeline.core.export.meta_csv import meta_analysis_csv
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.arm_sides import (
    StoredSide,
    define_comparison,
    record_sides,
    remove_comparison,
    stored_comparisons,
)
from extraction_pipeline.core.ledger.database import utcnow
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.schema import outcome_labels
from extraction_pipeline.core.synthesis.comparisons import (
    DEFAULT_COMPARISON,
    Assignment,
    ComparisonSides,
    comparison_name,
    proposed_side,
    side_of,
)
from extraction_pipeline.core.synthesis.csv_input import (
    ArmNumbers,
    OutcomeGroup,
    StudyArmsSeen,
    StudySource,
    parse_meta_csv,
    study_arms_of,
)
from extraction_pipeline.core.synthesis.effects import NOT_ESTIMABLE, StudyEffect
from extraction_pipeline.core.synthesis.pooling import PooledResult, pool

MAX_LABEL = 200


@dataclass(frozen=True)
class StudyRow:
    """One study of a forest plot: its effect, the review page it links to (None when the study's
    document is not in the batch), whether a reviewer decided every number it uses, and the arms'
    numbers it was computed from (None for a printed estimate) and the names of its two sides' arms."""

    effect: StudyEffect
    item_id: int | None
    reviewed: bool
    arms: ArmNumbers | None = None
    sides: tuple[str, str] = ("", "")
    line: int = 0  # its first line in the CSV: the plot keeps the file's order


@dataclass(frozen=True)
class OutcomeSynthesis:
    """One outcome in one measure across the batch's studies."""

    names: tuple[str, ...]  # the outcome names of its studies, as extracted
    result: PooledResult
    rows: tuple[StudyRow, ...]
    comparison: str = DEFAULT_COMPARISON
    notes: tuple[str, ...] = ()  # what the plot must say below it (a comparator split between rows)
    not_estimable: tuple[StudyRow, ...] = ()  # no events in either arm: drawn, not pooled

    @property
    def pooled(self) -> bool:
        return self.result.k >= 2


@dataclass(frozen=True)
class ArmSide:
    """One arm of one study in one comparison: its side, and the side proposed from its name."""

    arm: str
    name: str
    subgroup: str
    side: str
    proposed: str


@dataclass(frozen=True)
class StudySides:
    study: str
    document_id: int | None
    item_id: int | None
    arms: tuple[ArmSide, ...]


@dataclass(frozen=True)
class ComparisonView:
    """A comparison with every study's arms on their sides: what the batch page lets one edit."""

    name: str
    studies: tuple[StudySides, ...]


@dataclass(frozen=True)
class Problem:
    """Rows left out of the pooling for one reason, said once, with the studies to fix them in."""

    reason: str  # why, as the pooling says it
    rows: int
    studies: tuple[tuple[str, int | None], ...]  # (study, review page's item id), each once
    kind: str = ""  # UNNAMED, NOT_ESTIMABLE, or "" (said as the pooling says it)

    @property
    def sentence(self) -> str:
        """In words an analyst acts on, never CSV line numbers."""
        rows = f"{self.rows} row{'s' if self.rows != 1 else ''}"
        if self.kind == UNNAMED:
            return (
                f"{self.rows} outcome {'rows' if self.rows != 1 else 'row'} without an outcome name (or a study "
                "name), so nothing to pool with: name them on the review pages"
            )
        if self.kind == NOT_ESTIMABLE:
            return (
                f"{len(self.studies)} stud{'ies' if len(self.studies) != 1 else 'y'} with {NOT_ESTIMABLE} as a "
                "ratio, left out of the pooling as RevMan does (the command's --keep-double-zero pools them)"
            )
        return f"{self.reason} ({rows} left out)"


@dataclass(frozen=True)
class BatchSynthesis:
    outcomes: tuple[OutcomeSynthesis, ...]
    left_out: tuple[str, ...]
    comparisons: tuple[ComparisonView, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def pooled(self) -> tuple[OutcomeSynthesis, ...]:
        """Outcomes with two studies or more: the ones with a forest plot worth drawing."""
        return tuple(outcome for outcome in self.outcomes if outcome.pooled)


def current_labels(ledger: Ledger, batch_id: int) -> dict[str, str]:
    """The reviewer's labels in force: the latest per outcome name, empty labels dropped."""
    statement = (
        select(outcome_labels.c.name_key, outcome_labels.c.label)
        .where(outcome_labels.c.batch_id == batch_id)
        .order_by(outcome_labels.c.id)
    )
    latest: dict[str, str] = {}
    with ledger.engine.connect() as conn:
        for key, label in conn.execute(statement):
            latest[key] = label
    return {key: label for key, label in latest.items() if label}


def set_outcome_label(ledger: Ledger, batch_id: int, name: str, label: str, reviewer: str) -> str:
    """Pool the outcome called ``name`` under ``label`` (empty: under its own name again); returns
    the normalized name the label was recorded for."""
    key = normalize_name(name)
    if not key:
        raise ConfigError(f"outcome {name!r}: no name to group by")
    label = " ".join(label.split())
    if len(label) > MAX_LABEL:
        raise ConfigError(f"a label is at most {MAX_LABEL} characters")
    if label and not normalize_name(label):
        raise ConfigError(f"label {label!r}: it needs letters or digits")
    with ledger.engine.begin() as conn:
        conn.execute(
            insert(outcome_labels).values(
                batch_id=batch_id, name_key=key, label=label, reviewer=reviewer, decided_at=utcnow()
            )
        )
    return key


def batch_comparisons(ledger: Ledger, batch_id: int) -> tuple[ComparisonSides, ...]:
    """The proposed comparison, then each the analyst named, with the sides assigned."""
    stored = stored_comparisons(ledger, batch_id)
    names = (DEFAULT_COMPARISON, *(name for name in stored.names if name != DEFAULT_COMPARISON))
    return tuple(
        ComparisonSides(
            name,
            tuple(
                Assignment(str(side.document_id), side.arm, side.side, f"comparison {name!r}")
                for side in stored.sides
                if side.comparison == name
            ),
        )
        for name in names
    )


def add_comparison(ledger: Ledger, batch_id: int, name: str, reviewer: str) -> str:
    """Name a new comparison of the batch (its sides start as proposed); returns the name."""
    name = comparison_name(name, "the comparison")
    if name in {c.name for c in batch_comparisons(ledger, batch_id)}:
        raise ConfigError(f"the batch already has a comparison {name!r}")
    define_comparison(ledger, batch_id, name, reviewer)
    return name


def drop_comparison(ledger: Ledger, batch_id: int, name: str, reviewer: str) -> None:
    """Remove a comparison the analyst named; the proposed one is always pooled (its arms can be
    left out of it instead)."""
    if name == DEFAULT_COMPARISON:
        raise ConfigError(
            f"{name!r} is the proposed comparison and is always pooled: set an arm to 'none' to leave it out"
        )
    if name not in {c.name for c in batch_comparisons(ledger, batch_id)}:
        raise ConfigError(f"no comparison {name!r} in this batch")
    remove_comparison(ledger, batch_id, name, reviewer)


def set_sides(ledger: Ledger, batch_id: int, comparison: str, sides: dict[tuple[int, str], str], reviewer: str) -> int:
    """Assign arms (``(document id, arm id)`` → side) to sides in ``comparison``; an arm the batch's
    CSV does not have is refused. Returns how many sides changed."""
    named = next((c for c in batch_comparisons(ledger, batch_id) if c.name == comparison), None)
    if named is None:
        raise ConfigError(f"no comparison {comparison!r} in this batch")
    known = {
        (study.document_id, arm): name
        for study in study_arms_of(meta_analysis_csv(ledger, batch_id))
        for arm, name, _subgroup in study.arms
    }
    stored = []
    for (document_id, arm), side in sides.items():
        if (document_id, arm) not in known:
            raise ConfigError(f"document {document_id} has no arm {arm!r} in this batch")
        chosen = side_of(side, arm)
        if chosen != named.side([str(document_id)], arm, known[document_id, arm]):  # a form sends every arm
            stored.append(StoredSide(comparison, document_id, arm, known[document_id, arm], chosen))
    return record_sides(ledger, batch_id, stored, reviewer)


def batch_synthesis(ledger: Ledger, batch_id: int) -> BatchSynthesis:
    """Every outcome of the batch with data to pool, per comparison, in the order the CSV first
    names it."""
    labels = current_labels(ledger, batch_id)
    text = meta_analysis_csv(ledger, batch_id)
    item_of = {int(item["document_id"]): int(item["id"]) for item in batch_item_rows(ledger, batch_id)}
    names = _names_by_line(text)
    outcomes: list[OutcomeSynthesis] = []
    left_out: dict[str, None] = {}
    comparisons = batch_comparisons(ledger, batch_id)
    for comparison in comparisons:
        data = parse_meta_csv(text, labels=labels, strict=False, comparison=comparison)
        outcomes.extend(outcome_synthesis(group, item_of, names) for group in data.groups)
        left_out.update(dict.fromkeys(data.left_out))
    seen = study_arms_of(text)
    views = tuple(ComparisonView(c.name, tuple(_study_sides(study, c, item_of) for study in seen)) for c in comparisons)
    return BatchSynthesis(tuple(outcomes), tuple(left_out), views, grouped_problems(tuple(left_out), text, item_of))


# A left-out note names its CSV line(s) first ("line 12: ...", "lines 3 and 9: ..."), then why.
NOTE_LINES = re.compile(r"^lines? ([\d, ]+(?: and \d+)?): ")  # "line 4: ", "lines 2, 3: ", "lines 3 and 9: "
UNNAMED = "no study or no outcome name, so nothing to pool it with"


def grouped_problems(left_out: tuple[str, ...], text: str, item_of: dict[int, int]) -> tuple[Problem, ...]:
    """The left-out rows grouped by why, in words, each with the studies whose review pages fix
    them (never CSV line numbers: a reader of the batch page has no CSV open)."""
    rows = _rows_by_line(text)
    grouped: dict[str, tuple[int, dict[tuple[str, int | None], None], str]] = {}
    for note in left_out:
        found = NOTE_LINES.match(note)
        lines = [int(number) for number in re.findall(r"\d+", found.group(1))] if found else []
        reason = note[found.end() :] if found else note
        kind = UNNAMED if reason == UNNAMED else NOT_ESTIMABLE if NOT_ESTIMABLE in reason else ""
        key = kind or reason
        count, studies, first = grouped.get(key, (0, {}, reason))
        grouped[key] = (count + 1, studies, first)
        for line in lines:
            study, document = rows.get(line, ("", None))
            studies[(study or "a study without a name", item_of.get(document) if document is not None else None)] = None
    return tuple(
        Problem(reason, count, tuple(studies), key if key in (UNNAMED, NOT_ESTIMABLE) else "")
        for key, (count, studies, reason) in grouped.items()
    )


def _rows_by_line(text: str) -> dict[int, tuple[str, int | None]]:
    """Each CSV line's study and document, as the parser counts lines."""
    reader = csv.DictReader(io.StringIO(text))
    found = {}
    for row in reader:
        document = (row.get("document_id") or "").strip()
        found[reader.line_num] = ((row.get("study") or "").strip(), int(document) if document.isdigit() else None)
    return found


def _study_sides(study: StudyArmsSeen, comparison: ComparisonSides, item_of: dict[int, int]) -> StudySides:
    keys = [str(study.document_id)] if study.document_id is not None else []
    return StudySides(
        study.study,
        study.document_id,
        item_of.get(study.document_id) if study.document_id is not None else None,
        tuple(
            ArmSide(arm, name, subgroup, comparison.side([*keys, study.study], arm, name), proposed_side(arm, name))
            for arm, name, subgroup in study.arms
        ),
    )


def _names_by_line(text: str) -> dict[int, str]:
    """Each CSV line's outcome name as extracted (the group shows the reviewer's label instead)."""
    reader = csv.DictReader(io.StringIO(text))
    names = {}
    for row in reader:
        names[reader.line_num] = row.get("outcome_name") or ""  # the line the row ended on, as the parser counts
    return names


def outcome_synthesis(
    group: OutcomeGroup, item_of: dict[int, int] | None = None, names: dict[int, str] | None = None
) -> OutcomeSynthesis:
    """One outcome's pooling and forest-plot rows from its CSV group; ``item_of`` maps a document
    to its review page's item, ``names`` a CSV line to its outcome name as extracted."""
    item_of, names = item_of or {}, names or {}
    sources = group.sources  # parse_meta_csv gives every study its source
    rows = tuple(_row(effect, source, item_of) for effect, source in zip(group.effects, sources, strict=True))
    extracted = tuple(dict.fromkeys(names.get(source.lines[0], "") for source in sources if source.lines))
    return OutcomeSynthesis(
        tuple(name for name in extracted if name),
        pool(group.effects),
        rows,
        group.comparison,
        group.notes,
        tuple(_row(effect, source, item_of) for effect, source in group.not_estimable),
    )


def _row(effect: StudyEffect, source: StudySource, item_of: dict[int, int]) -> StudyRow:
    item_id = item_of.get(source.document_id) if source.document_id is not None else None
    return StudyRow(effect, item_id, source.reviewed, source.arms, source.sides, min(source.lines, default=0))
