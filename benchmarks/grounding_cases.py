"""Benchmark: numeric-aware grounding on real cases.

CASES.jsonl holds one case per line: ``{"pdf": "3321528.pdf", "quote": ..., "value": ..., "kind":
"true" | "forged"}`` — a true quote is a PubMed Central sentence carrying a gold number, to be
found in the PDF; a forged one has one digit of its value changed. For every true quote this
also forges: a digit changed anywhere, two numbers swapped, a minus sign dropped, a decimal point
moved. Prints the share verified per kind (true: higher is better; every forgery: must be 0), and
grounding speed on the longest paper.

    .venv/bin/python -m benchmarks.grounding_cases CASES.jsonl [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path

from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import run_isolated
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.verification.grounding import VERIFIED, Grounder

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def forgeries(quote: str, rng: random.Random) -> dict[str, str]:
    found: dict[str, str] = {}
    digits = [m.start() for m in re.finditer(r"\d", quote)]
    if digits:
        i = rng.choice(digits)
        found["digit changed anywhere"] = quote[:i] + str((int(quote[i]) + rng.randint(1, 9)) % 10) + quote[i + 1 :]
    tokens = list(NUMBER.finditer(quote))
    distinct = [(a, b) for a in tokens for b in tokens if a.start() < b.start() and a.group() != b.group()]
    if distinct:
        a, b = rng.choice(distinct)
        found["two numbers swapped"] = (
            quote[: a.start()] + b.group() + quote[a.end() : b.start()] + a.group() + quote[b.end() :]
        )
    # A sign, not a hyphen: at the start or after a space, bracket, "=" or ":" ("CI: −5.3").
    minus = re.search(r"(?:^|(?<=[\s(\[=:]))[-\u2212\u2013](?=\d)", quote)
    if minus:
        found["minus sign dropped"] = quote[: minus.start()] + quote[minus.end() :]
    decimals = [m for m in tokens if "." in m.group() and len(m.group().replace(".", "")) >= 2]
    if decimals:
        m = rng.choice(decimals)
        digits_only = m.group().replace(".", "")
        point = m.group().index(".")
        new_point = point - 1 if point > 1 else point + 1
        moved = digits_only[:new_point] + "." + digits_only[new_point:]
        found["decimal point moved"] = quote[: m.start()] + moved + quote[m.end() :]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path)
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("EXTRACTION_CORPUS", DEFAULT_CORPUS)))
    args = parser.parse_args()
    cases = [json.loads(line) for line in args.cases.read_text().splitlines() if line.strip()]
    by_pdf: dict[str, list[dict[str, str]]] = defaultdict(list)
    for case in cases:
        by_pdf[case["pdf"]].append(case)
    print(f"grounding: {len(cases)} cases over {len(by_pdf)} PDFs; cores={os.cpu_count()}")
    rng = random.Random(7)  # noqa: S311  (reproducible forgeries)
    verified: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    failures: list[str] = []
    grounders: dict[str, Grounder] = {}
    for pdf_name, pdf_cases in sorted(by_pdf.items()):
        result = run_isolated(args.corpus / "pdf" / pdf_name, timeout_seconds=300, limits=EngineOptions())
        parsed = ParsedDocument(pdf_name, result["pages_text"], [ParsedTable(**t) for t in result["tables"]])
        grounder = grounders[pdf_name] = Grounder(parsed)
        for case in pdf_cases:
            verdict = grounder.ground(case["value"], case["quote"])
            kind = "true quote" if case["kind"] == "true" else "forged (tool: value digit)"
            totals[kind] += 1
            verified[kind] += verdict.status == VERIFIED
            if case["kind"] == "true" and verdict.status != VERIFIED:
                failures.append(
                    f"{pdf_name}: {verdict.status} {verdict.confidence} {verdict.reason}: {case['quote'][:90]}"
                )
            if case["kind"] == "true":
                for forgery, forged in forgeries(case["quote"], rng).items():
                    totals[forgery] += 1
                    verified[forgery] += grounder.ground(None, forged).status == VERIFIED
    for kind in [
        "true quote",
        "forged (tool: value digit)",
        *sorted(k for k in totals if k not in ("true quote", "forged (tool: value digit)")),
    ]:
        print(
            f"  {kind:28s} {verified[kind]:4d}/{totals[kind]:4d} verified  ({100 * verified[kind] / totals[kind]:.1f}%)"
        )
    longest = max(grounders.values(), key=lambda g: g.parsed.pages)
    quotes = [c["quote"] for c in by_pdf[longest.parsed.sha256]] * 5
    fresh = Grounder(longest.parsed)
    started = time.perf_counter()
    timings = []
    for quote in quotes:
        t = time.perf_counter()
        fresh.ground(None, quote)
        timings.append(time.perf_counter() - t)
    total = time.perf_counter() - started
    print(
        f"speed on {longest.parsed.sha256} ({longest.parsed.pages} pages, {len(longest.text)} chars): "
        f"{len(quotes) / total:.0f} quotes/s, median {statistics.median(timings) * 1000:.2f} ms/quote "
        f"(first quote builds the document index)"
    )
    if failures:
        print("true quotes not verified:")
        for line in failures:
            print("  " + line)


if __name__ == "__main__":
    main()
