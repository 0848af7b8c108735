"""A home to estimate batches in (core/extraction/estimate.py and the modules it is made of):
documents registered as a user would, the estimate asked as the command line asks it, and a
batch then run as a run would (no Dagster) to compare what it really cost. The fake answers
``honest``ly: quoted from the paper, with OpenAI's own token counts."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import litellm

from extraction_pipeline.core.extraction.estimate import BatchEstimate, estimate_batch
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.engine import import_pymupdf
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, report_pages
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json

MODEL = "openai/gpt-4o-mini"  # priced in litellm's map, with batch prices (half)
PROJECT = "trials"


@dataclass
class Home:
    settings: Settings
    ledger: Ledger

    def register(self, path: Path) -> int:
        return register_pdf(self.ledger, self.settings.documents_dir, PROJECT, path).id

    def estimate(self, ids: list[int], llm: LLMConfig, **options: object) -> BatchEstimate:
        return estimate_batch(
            self.ledger,
            project=PROJECT,
            document_ids=ids,
            llm=llm,
            parse_options=self.settings.parse_options(),
            **options,  # type: ignore[arg-type]
        )

    def run_batch(self, key: str, ids: list[int], llm: LLMConfig, **options: object) -> float:
        """Create the batch, extract every document as a run would (no Dagster); its total cost."""
        batch = create_batch(
            self.ledger,
            idempotency_key=key,
            project=PROJECT,
            user="u",
            document_ids=ids,
            **options,  # type: ignore[arg-type]
        ).id
        for item in batch_item_rows(self.ledger, batch):
            parsed = parse_document(
                self.ledger,
                sha256=item["sha256"],
                stored_path=item["stored_path"],
                options=self.settings.parse_options(),
            )
            outcome = extract_item(self.ledger, item_id=item["id"], run_id=key, worker="w", parsed=parsed, llm=llm)
            assert outcome.status == "completed", outcome.reason
        return sum(float(item["cost_usd"]) for item in batch_item_rows(self.ledger, batch))


@contextlib.contextmanager
def estimate_home(tmp_path: Path) -> Iterator[Home]:
    """A home of its own (SQLite ledger), disposed of afterwards."""
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    yield Home(settings, ledger)
    ledger.dispose()


def honest(fake: FakeLLMServer) -> list[int]:
    """The fake answers every document with three outcomes quoted from its own text (about 800
    tokens, a real answer's size) and reports its usage as OpenAI would: the prompt counted by
    tiktoken, the structured output schema with it ("the structured output schema serves as a
    prefix to the system message", OpenAI's prompt caching guide), the answer's own tokens.
    The schema is counted as the estimate counts it (its compact JSON, by tiktoken): that it is
    counted at all is what a test can show here; OpenAI's own count of it is not known.
    Returns the list its answers' lengths are appended to."""
    lengths: list[int] = []

    def answer(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        sent = body.get("response_format") or {}
        schema = json.dumps(sent["json_schema"], separators=(",", ":")) if sent.get("type") == "json_schema" else ""
        document = document_from_messages(messages)
        sentences = [s.strip() + "." for s in document.replace("\n", " ").split(".") if len(s.strip()) > 30]
        values: dict[str, tuple[object, str | None]] = {
            "metadata.nct_number": ("NCT" + hashlib.sha256(document.encode()).hexdigest()[:8], sentences[0]),
        }
        for n in range(1, 4):
            quote = sentences[n % len(sentences)]
            values |= {
                f"outcomes.{n}.outcome_name": (f"outcome {n}: {quote[:60]}", quote),
                f"outcomes.{n}.timepoint": ("12 months", quote),
                f"outcomes.{n}.effect_measure": ("HR", quote),
                f"outcomes.{n}.effect_estimate": (0.8, quote),
            }
        content = extraction_json(values)
        tokens_in = litellm.token_counter(model="gpt-4o-mini", messages=messages)
        tokens_in += litellm.token_counter(model="gpt-4o-mini", text=schema) if schema else 0
        tokens_out = litellm.token_counter(model="gpt-4o-mini", text=content)
        lengths.append(tokens_out)
        return Reply(content, tokens_in=tokens_in, tokens_out=tokens_out)

    fake.answer_request = answer
    return lengths


def long_report(index: int, directory: Path, pages: int) -> Path:
    """A trial report of ``pages`` pages (the synthetic report and pages of methods prose)."""
    pymupdf = import_pymupdf()
    trial = make_trial(index)
    filler = [
        f"Methods, part {p}. "
        + " ".join(f"Site {p}-{k} enrolled {17 * k + p} patients with {trial.condition}." for k in range(40))
        for p in range(1, pages - 1)
    ]
    path = directory / f"long-{index}.pdf"
    directory.mkdir(parents=True, exist_ok=True)
    with pymupdf.open() as doc:
        for text in [*report_pages(trial), *filler]:
            page = doc.new_page(width=595, height=842)
            page.insert_textbox(pymupdf.Rect(40, 40, 555, 802), text, fontsize=8, fontname="helv")
        doc.save(path)
    return path


def shas(home: Home, ids: list[int]) -> list[str]:
    from extraction_pipeline.core.ledger.documents import get_document

    return [str((get_document(home.ledger, i) or {"sha256": ""})["sha256"]) for i in ids]


def parser_version(home: Home) -> str:
    return home.settings.parse_options().limits.parser_version
