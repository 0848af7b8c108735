"""Prompt sizes of the corpus: how many tokens each paper's extraction prompt needs (the built-in
RCT template, the project's default parse), against the context windows of common models.

    .venv/bin/python -m benchmarks.prompt_sizes [--corpus DIR] [--model openai/gpt-4o-mini]
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.llm.gateway import LLMConfig, context_limit, count_tokens
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import run_isolated
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("EXTRACTION_CORPUS", DEFAULT_CORPUS)))
    parser.add_argument("--model", default="openai/gpt-4o-mini")
    args = parser.parse_args()
    config = LLMConfig(model=args.model)
    template = BASE_TEMPLATES[RCT_BASE]
    sizes: list[tuple[int, str, int]] = []
    for pdf in sorted((args.corpus / "pdf").glob("*.pdf")):
        result = run_isolated(pdf, timeout_seconds=300, limits=EngineOptions())
        parsed = ParsedDocument(pdf.name, result["pages_text"], [ParsedTable(**t) for t in result["tables"]])
        tokens = count_tokens(config, build_messages(template, parsed.pages_text, parsed.tables))
        sizes.append((tokens, pdf.name, parsed.pages))
    limit = context_limit(config)
    print(f"prompt sizes: {len(sizes)} corpus papers, model {args.model} (window {limit}), cores={os.cpu_count()}")
    for tokens, name, pages in sorted(sizes, reverse=True):
        print(f"  {name:14s} {pages:3d} pages {tokens:7d} tokens")
    tokens = [s[0] for s in sizes]
    print(f"median {statistics.median(tokens):.0f} tokens, largest {max(tokens)} ({max(sizes)[1]})")


if __name__ == "__main__":
    main()
