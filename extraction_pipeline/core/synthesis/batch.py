"""A batch's meta-analysis as the batch page and the workbook show it: per outcome, its studies and
their pooled estimates, from the same CSV an analyst downloads.

The batch's meta-analysis CSV (``core.export.meta_csv``) holds the final values: a reviewer's
correction replaces the machine's number, "not reported" empties it. Pooling goes through that
text and ``parse_meta_csv``, so what the page draws is what ``extraction-pipeline synthesis`` prints
for the downloaded file. Outcomes are grouped by name the way ``evaluate`` matches them, and a
reviewer may pool differently named outcomes as one (``set_outcome_label``); those labels are
appended to the ledger, the latest per name holds.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from sqlalchemy import insert, select

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.evaluation.matching import normalize_name
from extraction_pipeline.core.export.meta_csv import meta_analysis_csv
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.database import utcnow
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.schema import outcome_labels
from extraction_pipeline.core.synthesis.csv_input import OutcomeGroup, parse_meta_csv
from extraction_pipeline.core.synthesis.effects import StudyEffect
from extraction_pipeline.core.synthesis.pooling import PooledResult, pool

MAX_LABEL = 200


@dataclass(frozen=True)
class StudyRow:
    """One study of a forest plot: its effect, the review page it links to (None when the study's
    document is not in the batch) and whether a reviewer decided every number it uses."""

    effect: StudyEffect
    item_id: int | None
    reviewed: bool


@dataclass(frozen=True)
class OutcomeSynthesis:
    """One outcome in one measure across the batch's studies."""

    names: tuple[str, ...]  # the outcome names of its studies, as extracted
    result: PooledResult
    rows: tuple[StudyRow, ...]

    @property
    def pooled(self) -> bool:
        return self.result.k >= 2


@dataclass(frozen=True)
class BatchSynthesis:
    outcomes: tuple[OutcomeSynthesis, ...]
    left_out: tuple[str, ...]

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


def batch_synthesis(ledger: Ledger, batch_id: int) -> BatchSynthesis:
    """Every outcome of the batch with data to pool, in the order the CSV first names it."""
    labels = current_labels(ledger, batch_id)
    text = meta_analysis_csv(ledger, batch_id)
    data = parse_meta_csv(text, labels=labels, strict=False)
    item_of = {int(item["document_id"]): int(item["id"]) for item in batch_item_rows(ledger, batch_id)}
    names = _names_by_line(text)
    return BatchSynthesis(tuple(_outcome(group, item_of, names) for group in data.groups), data.left_out)


def _names_by_line(text: str) -> dict[int, str]:
    """Each CSV line's outcome name as extracted (the group shows the reviewer's label instead)."""
    reader = csv.DictReader(io.StringIO(text))
    names = {}
    for row in reader:
        names[reader.line_num] = row.get("outcome_name") or ""  # the line the row ended on, as the parser counts
    return names


def _outcome(group: OutcomeGroup, item_of: dict[int, int], names: dict[int, str]) -> OutcomeSynthesis:
    sources = group.sources  # parse_meta_csv gives every study its source
    rows = tuple(
        StudyRow(effect, item_of.get(source.document_id) if source.document_id is not None else None, source.reviewed)
        for effect, source in zip(group.effects, sources, strict=True)
    )
    extracted = tuple(dict.fromkeys(names.get(source.lines[0], "") for source in sources if source.lines))
    return OutcomeSynthesis(tuple(name for name in extracted if name), pool(group.effects), rows)
