"""How far the review of a batch has come, per document (one read of items, one of decisions)."""

from __future__ import annotations

from dataclasses import dataclass, field

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.review.decisions import current_decisions
from extraction_pipeline.core.review.status_words import StatusCounts, status_counts
from extraction_pipeline.core.review.values import Decision, reviewable_values

NOTHING_EXTRACTED = "nothing extracted — check the paper"


@dataclass(frozen=True)
class DocumentReview:
    item_id: int
    document_id: int
    filename: str
    status: str  # the item's extraction status
    message: str | None
    counts: StatusCounts = field(default_factory=StatusCounts)  # the machine's statuses, one tier each
    values: int = 0  # the model's values and those a reviewer set where the model gave none
    decided: int = 0
    reviewers: tuple[str, ...] = field(default_factory=tuple)
    added: int = 0  # of ``values``, set by a reviewer where the model gave none

    @property
    def reviewed(self) -> bool:
        """Every value has a decision. A document from which nothing was extracted is never
        reviewed (whatever a reviewer set by hand): nothing of the model's was checked, and a
        paper that yields nothing needs a look."""
        return self.status == "completed" and self.values > self.added and self.values == self.decided

    @property
    def label(self) -> str:
        if self.status != "completed":
            return f"not reviewable ({self.status})"
        if self.values == self.added:
            return NOTHING_EXTRACTED
        if self.reviewed:
            return f"reviewed by {', '.join(self.reviewers)}"
        return f"not yet reviewed ({self.decided} of {self.values} values decided)"

    @property
    def verified(self) -> int:
        """Verified with no flag: the only values counted as verified."""
        return self.counts.verified

    @property
    def verified_flagged(self) -> int:
        return self.counts.verified_flagged

    @property
    def approximate(self) -> int:
        return self.counts.approximate

    @property
    def unverified(self) -> int:
        return self.counts.unverified

    @property
    def judgements(self) -> int:
        return self.counts.judgements


def batch_review(ledger: Ledger, batch_id: int) -> list[DocumentReview]:
    decided = current_decisions(ledger, batch_id)
    return [review_of(item, decided) for item in batch_item_rows(ledger, batch_id)]


def review_of(item: ItemListing, decided: dict[tuple[int, str], Decision]) -> DocumentReview:
    values = reviewable_values(item["result_json"])
    item_id = int(item["id"])
    mine = [decided[(item_id, path)] for path in values if (item_id, path) in decided]
    # A field the model left empty that a reviewer set (or confirmed as not reported): a value, decided.
    added = [d for (key, path), d in decided.items() if key == item_id and path not in values]
    return DocumentReview(
        item_id=item_id,
        document_id=int(item["document_id"]),
        filename=str(item["filename"]),
        status=str(item["status"]),
        message=item["message"],
        counts=status_counts(value.machine for value in values.values()),
        values=len(values) + len(added),
        decided=len(mine) + len(added),
        reviewers=tuple(sorted({d.reviewer for d in (*mine, *added)})),
        added=len(added),
    )
