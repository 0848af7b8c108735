"""The recall check: what a paper reports that no extracted value covers.

Extraction models are precise but forgetful: they leave out whole outcomes and single arm numbers
without a word. After extraction, each document gets a short list of *possibly missed* items,
each placed in the paper the way a grounded value is (page, "text" or "table N", character
offsets in that page's text or table text), so the review page can highlight it:

- ``OUTCOME``: a result the paper reports (a row of a results table that names no extracted
  outcome, or a sentence of the abstract or the results section with a statistic per arm) whose
  numbers no extracted value has. Its label is the outcome's name as printed: a row's label, or a
  sentence's subject (the words before its first verb, or after "difference in", without a
  section lead-in, articles, "mean" or the groups compared), so a follow-up question can ask
  for it by name;
- ``TABLE_ROW``: a results-table row with arm numbers (means, SDs, events, totals, group sizes)
  that an extracted outcome should have and does not: half of a statistic read ("12.1 (3.4)" with
  the mean extracted, not the SD), one arm read and not the other, the row of an extracted
  outcome whose numbers were taken from nowhere, or the group size an outcome lacks;
- ``RESULT_TEXT``: the same for a sentence of the abstract or the results section.

The answer is read in arms (``recall_answer``: version 1's two arms, or version 2's declared
arms with one outcome entry per arm), each outcome with its numbers per arm. An arm a version 2
answer declares with no number for an outcome its other arms have numbers for is listed by name,
"<outcome>: no numbers for H2 (haloperidol 2 mg)" (the arm's label, and what it received where
the label does not say it), where the other arms' numbers are quoted, with the unread statistics
printed beside them. Only arms reported together with the outcome's arms count (a paper may
compare treatments in its outcomes and, apart, patients with and without a diagnosis), and arms
of subgroups and arms of the whole trial are apart.

An extracted outcome missing a number its other numbers imply (one arm's SD and not another's,
events without their total, a mean without its SD) is also listed where the number it has is
quoted — a results row, a baseline-table row, a methods sentence — with the unread numbers printed
beside that one (the other arm's statistic, or the other half of its own): whatever the layout,
the lost number is there more often than not. Findings whose places overlap are one item (labels
joined with ``LABEL_SEPARATOR``; one outcome's, "PONV: no numbers for H1, H2", named once), and
the listed unread rows of one table are one item naming each row: a reviewer checks a table once.

How the paper is read. Plain PDF text prints a table one cell per line (sometimes a row per line,
sometimes column by column), so rows are rebuilt from the page text: a table's region starts at
its caption ("Table 2 ..."); in it, a row is a label line followed by the lines that hold only
numbers, or, in a table some PDF writers print right to left, those lines followed by their label;
whole numbers repeated as the same time points under each outcome ("0", "12", "24" under "Weeks")
are when, not results; a table printing outcomes as columns (a head per outcome over the same
statistics' heads, arms or time points as rows) is read as one place per outcome head
(``recall_columns``). Baseline-characteristics tables ("Baseline", "Characteristics",
"Demographics" in the caption) hold no results and are skipped. Parsed tables are used only on pages whose text gave no
rows (their numbers are less faithful than the page text's). Running heads and footers (lines
repeated on many pages) are ignored.

What "read" means. A number of the paper is read by an extracted outcome when one of the
outcome's values equals it (sign aside) and the outcome is tied to the place: one of its quotes
is located there, or it has two distinctive numbers there (decimals, or integers of 10 and more),
or one number and a row label that names it (``label_names``, the evaluation's strict matching,
told apart from every other row label and extracted name of the paper). Numbers the template
has no field for (p-values, percentages beside counts, confidence and interquartile ranges) are
shown but never asked for.

Precision matters as much as recall, so a row an extraction used is listed only for the specific
arm numbers above, and the list is capped in rows (``limit``: an item naming several outcomes, a
table's unread rows, counts each), most likely misses first (``recall_ranking``): missing group
sizes, half-read statistics, a missing arm, statistics of a row the answer read, of the kind it
read, that no value has (version 2: outcomes or arms printed as columns), a three-arm row's third
arm (version 1, which cannot name it), an arm the answer declares without numbers; then unread
results, ranked by what points to them: rows of tables the extraction used, places near the
answer's quotes, outcomes the abstract names or numbers it prints, sentences of the abstract and
the results section no table repeats (a result printed only in the text is one a model easily
skips). A table's unread rows are cut to the likeliest that fit, and its item says how many more
there are. The list is returned in reading order.

The check is split by what it does: ``recall_answer`` reads the answer, ``recall_numbers`` the
numbers of a row or sentence, ``recall_rows`` the rows of tables, ``recall_columns`` outcomes
printed as columns, and ``recall_places`` the rest of the paper's layout, ``recall_labels`` names
what a place reports, ``recall_coverage`` tells what the answer read and lacks, ``recall_ranking``
ranks and merges the findings into the list of ``recall_items``; this module puts them together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.verification.recall_answer import read_answer
from extraction_pipeline.core.verification.recall_coverage import (
    incomplete,
    judge,
    missing_sizes,
    numbers_read,
    rows_quoted,
)
from extraction_pipeline.core.verification.recall_items import LABEL_SEPARATOR, MissedKind, PossiblyMissed
from extraction_pipeline.core.verification.recall_places import read_layout
from extraction_pipeline.core.verification.recall_ranking import tables_read_by_none, within_rows

__all__ = ["DEFAULT_LIMIT", "LABEL_SEPARATOR", "MissedKind", "PossiblyMissed", "possibly_missed"]

DEFAULT_LIMIT = 10  # rows per document (an item naming several outcomes counts each): a list read to the end


def possibly_missed(
    document: ParsedDocument,
    fields: Mapping[str, GroundedValue],
    *,
    limit: int = DEFAULT_LIMIT,
    likeliest_first: bool = False,
) -> list[PossiblyMissed]:
    """What ``document`` reports that none of ``fields`` (a result's grounded fields, path ->
    GroundedValue, as ``fields_of`` reads them) covers: at most ``limit`` items, the most likely
    misses kept, in reading order (page, then place on the page), or likeliest first."""
    answer = read_answer(fields)
    extracted, sizes = answer.entries, answer.sizes
    arms = tuple(dict.fromkeys([*answer.arm_names.values(), *answer.interventions.values()]))
    layout = read_layout(document, sizes, arms)
    row_labels = (c.label for c in layout.candidates if not c.prose and c.label)
    layout.names = tuple(dict.fromkeys([*(e.name for e in extracted if e.outcome and e.name), *row_labels]))
    layout.quoted_rows = rows_quoted(extracted, layout.candidates)
    layout.used_tables = {
        c.table
        for c in layout.candidates
        if c.table and numbers_read(c, extracted, layout.names, sizes, layout.quoted_rows)
    }
    listed = [j for c in layout.candidates if (j := judge(c, answer, layout)) is not None]
    listed += missing_sizes(document, answer, [c for c in layout.candidates if not c.prose])
    listed += incomplete(document, answer, layout)
    # A sentence that only repeats the numbers of a listed row adds nothing for the reviewer.
    in_rows = {n for entry in listed if not entry.prose for n in entry.values}
    listed = [e for e in listed if not (e.prose and e.values and e.values <= in_rows)]
    unread = Counter(e.unread_row_of for e in listed if e.unread_row_of)  # a table's unread rows
    likeliest = sorted(listed, key=lambda e: (-e.rank, e.item.page, e.item.start))
    chosen = tables_read_by_none(document, within_rows(likeliest, limit), unread)
    chosen.sort(key=lambda e: (-e.rank, e.item.page, e.item.start))
    if likeliest_first:
        return [e.item for e in chosen]
    chosen.sort(key=lambda e: (e.item.page, e.item.source != "text", e.item.source, e.item.start))
    return [e.item for e in chosen]
