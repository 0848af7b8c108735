"""Prompt and answer sizes of the corpus: how many tokens each paper's extraction prompt needs
(the built-in RCT template, the project's default parse), against the model's context window, and
how long the answers are against its output limit. The answers are the oracle's (the gold
outcomes' printed values with their quotes): a lower bound, since a model also answers the study
details, baseline and Risk of Bias, and outcomes the gold set leaves out.

    .venv/bin/python -m benchmarks.prompt_sizes [--corpus DIR] [--model openai/gpt-4o-mini] [--answers-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.llm.gateway import LLMConfig, context_limit, count_tokens, output_limit
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import run_isolated
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE
from extraction_pipeline_tests.support import oracle

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("EXTRACTION_CORPUS", DEFAULT_CORPUS)))
    parser.add_argument("--model", default="openai/gpt-4o-mini")
    parser.add_argument("--answers-only", action="store_true", help="skip the prompts (no parsing)")
    args = parser.parse_args()
    config = LLMConfig(model=args.model)
    oracle.CORPUS = args.corpus  # the oracle reads the gold values and PDFs from here
    if not args.answers_only:
        _prompts(args, config)
    _answers(args, config)


def _answers(args: argparse.Namespace, config: LLMConfig) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    pmcids = sorted({str(row["pmcid"]) for row in json.loads((args.corpus / "gold_outcomes.json").read_text())})
    sizes = []
    for pmcid in pmcids:
        if not (args.corpus / "pdf" / f"{pmcid}.pdf").is_file():
            continue
        answer = oracle.build_answer(pmcid)
        text = answer.as_json()
        sizes.append((int(litellm.token_counter(model=config.effective_model, text=text)), pmcid, len(answer.gold)))
    print(
        f"answer sizes: {len(sizes)} corpus papers with gold outcomes, oracle answers (a lower bound), "
        f"model {args.model} (output limit {output_limit(config)}), cores={os.cpu_count()}"
    )
    for tokens, pmcid, values in sorted(sizes, reverse=True)[:5]:
        print(f"  {pmcid:10s} {values:4d} gold values {tokens:7d} tokens")
    tokens = [s[0] for s in sizes]
    print(f"median {statistics.median(tokens):.0f} tokens, largest {max(tokens)} ({max(sizes)[1]})")


def _prompts(args: argparse.Namespace, config: LLMConfig) -> None:
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
