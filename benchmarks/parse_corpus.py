"""Benchmark: the parse engine on the real trial corpus ($EXTRACTION_CORPUS, or the corpus folder beside the checkout).

Reports seconds per page (median, p90; engine time inside the isolated child, which includes
loading the table model when a page has a table) and wall time per document (child start
included), and the share of gold numeric values (events, group sizes, means, SDs; values marked
`is_data_in_figure_graphics` excluded) found, compared as numbers, in the searchable text —
page text alone and page text + tables. Every missing value is classified: derived (not printed
in the PMC text either) or lost by the parse (printed in the PMC text, absent from ours).

    .venv/bin/python -m benchmarks.parse_corpus [--corpus DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.pdf.engine import TABLE_DETECTION_MODES, EngineOptions
from extraction_pipeline.core.pdf.isolation import ParseOptions, run_isolated
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import sha256_of

GOLD_FIELDS = {
    "intervention_events": "events",
    "comparator_events": "events",
    "intervention_group_size": "group sizes",
    "comparator_group_size": "group sizes",
    "intervention_mean": "means/SDs",
    "comparator_mean": "means/SDs",
    "intervention_standard_deviation": "means/SDs",
    "comparator_standard_deviation": "means/SDs",
}
NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?")
DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def numbers_in(text: str) -> set[float]:
    text = text.replace("\u2212", "-").replace("\u2009", " ")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,234 -> 1234
    return {float(match) for match in NUMBER.findall(text)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("EXTRACTION_CORPUS", DEFAULT_CORPUS)))
    parser.add_argument("--limit", type=int, default=0, help="only the first N PDFs")
    parser.add_argument("--tables", choices=TABLE_DETECTION_MODES, default="lines", help="table detection mode")
    args = parser.parse_args()
    options = EngineOptions(table_detection=args.tables)
    pdfs = sorted((args.corpus / "pdf").glob("*.pdf"))[: args.limit or None]
    gold = json.loads((args.corpus / "gold_outcomes.json").read_text())
    print(f"parse engine {options.parser_version}; corpus {args.corpus} ({len(pdfs)} PDFs); cores={os.cpu_count()}")

    per_page: list[float] = []
    walls: list[float] = []
    found_text: Counter[str] = Counter()
    found_all: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    excluded_figures = 0
    pages_total = tables_total = 0
    for pdf in pdfs:
        started = time.perf_counter()
        result = run_isolated(pdf, timeout_seconds=300, limits=options)
        walls.append(time.perf_counter() - started)
        doc = ParsedDocument(
            pdf.stem, result["pages_text"], [ParsedTable(**t) for t in result["tables"]], result["engine"]
        )
        per_page.append(result["seconds"] / doc.pages)
        pages_total += doc.pages
        tables_total += len(doc.tables)
        text_numbers = numbers_in(doc.full_text)
        all_numbers = numbers_in(doc.searchable_text)
        pmc_file = args.corpus / "pmc_text" / f"PMC{pdf.stem}.txt"
        pmc_numbers = numbers_in(pmc_file.read_text()) if pmc_file.exists() else set()
        for row in (r for r in gold if str(r["pmcid"]) == pdf.stem):
            if str(row.get("is_data_in_figure_graphics", "")).upper() == "TRUE":
                excluded_figures += 1
                continue
            for field, group in GOLD_FIELDS.items():
                raw = str(row.get(field, "")).strip()
                try:
                    value = float(raw)
                except ValueError:
                    continue
                totals[group] += 1
                found_text[group] += value in text_numbers
                found_all[group] += value in all_numbers
                if value not in all_numbers:
                    missing[
                        "derived (not printed in the PMC text either)"
                        if value not in pmc_numbers
                        else "lost by the parse (printed in the PMC text)"
                    ] += 1

    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.connect(f"sqlite:///{tmp}/ledger.db")
        pdf = pdfs[0]
        cached = ParseOptions(limits=options)
        parse_document(ledger, sha256=sha256_of(pdf), stored_path=str(pdf), options=cached)
        hits = []
        for _ in range(20):
            started = time.perf_counter()
            assert parse_document(ledger, sha256=sha256_of(pdf), stored_path=str(pdf), options=cached).cache_hit
            hits.append(time.perf_counter() - started)

    print(f"pages {pages_total}, tables found {tables_total}")
    print(f"engine seconds/page: median {statistics.median(per_page):.3f}  p90 {percentile(per_page, 0.9):.3f}")
    print(
        f"wall seconds/document (isolated child): median {statistics.median(walls):.2f}  "
        f"p90 {percentile(walls, 0.9):.2f}"
    )
    print(f"cache hit ({pdfs[0].name}, incl. sha256 of the file): median {statistics.median(hits) * 1000:.1f} ms")
    print(f"gold values (excluding {excluded_figures} figure-only outcome rows):")
    for group in sorted(totals):
        print(
            f"  {group:12s} {totals[group]:4d}  page text {100 * found_text[group] / totals[group]:5.1f}%  "
            f"text+tables {100 * found_all[group] / totals[group]:5.1f}%"
        )
    overall_text = 100 * sum(found_text.values()) / max(1, sum(totals.values()))
    overall_all = 100 * sum(found_all.values()) / max(1, sum(totals.values()))
    print(f"  {'all':12s} {sum(totals.values()):4d}  page text {overall_text:5.1f}%  text+tables {overall_all:5.1f}%")
    print("missing values:")
    for reason, count in missing.most_common():
        print(f"  {count:4d}  {reason}")


if __name__ == "__main__":
    main()
