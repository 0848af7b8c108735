"""Dagster-side helpers shared by the tests of assets and sensors (a real instance_for_test,
a real ledger file, synthetic PDFs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.defs.resources import LedgerResource, LLMResource, PipelineSettingsResource
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json


def resources_for(
    ledger: Ledger,
    home: Path,
    fake: FakeLLMServer | None = None,
    grace: float = 0.0,
    max_rounds: int = 5,
    per_run: int = Settings.documents_per_run,
) -> dict[str, Any]:
    """The resources of a run or sensor evaluation; ``per_run=1``: one run per document."""
    llm = LLMResource(model="openai/fake", api_base=fake.api_base, api_key="sk-x") if fake else LLMResource()
    return {
        "ledger": LedgerResource(database_url=str(ledger.engine.url)),
        "llm": llm,
        "settings": PipelineSettingsResource(
            home=str(home), reconcile_grace_seconds=grace, max_dispatch_rounds=max_rounds, documents_per_run=per_run
        ),
    }


def batch_tags(ledger: Ledger, batch_id: int) -> dict[str, str]:
    """The tags the dispatcher puts on a batch's runs."""
    batch = get_batch(ledger, batch_id)
    assert batch is not None
    return {"extraction/batch": str(batch_id), "extraction/batch_uid": batch["uid"]}


def register_trials(ledger: Ledger, home: Path, count: int) -> list[int]:
    pdfs = [write_report(make_trial(i), home / "src") for i in range(1, count + 1)]
    return [document.id for document in register_all(ledger, home / "documents", "p", pdfs)]


def answer_from_trial(messages: list[dict[str, str]]) -> Reply:
    from extraction_pipeline.core.extraction.prompts import document_from_messages

    text = document_from_messages(messages)
    trial = next(make_trial(i) for i in range(1, 50) if make_trial(i).nct_number in text)
    sentence = f"This trial was registered at ClinicalTrials.gov ({trial.nct_number})."
    return Reply(extraction_json({"metadata.nct_number": (trial.nct_number, sentence)}), tokens_in=900, tokens_out=40)


def failed_run(instance: dg.DagsterInstance, tags: dict[str, str], job_name: str = "extract_documents") -> str:
    @dg.op
    def crash() -> None:
        raise RuntimeError("worker died")

    @dg.job(name=job_name)  # a run record of that job whose worker died
    def crashed_job() -> None:
        crash()

    result = crashed_job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)
    assert not result.success
    return result.run_id


def queued_run(instance: dg.DagsterInstance, tags: dict[str, str]) -> str:
    @dg.op
    def noop() -> None:
        pass

    @dg.job(name="extract_documents")
    def queued_job() -> None:
        noop()

    return instance.create_run_for_job(queued_job, tags=tags).run_id  # NOT_STARTED: alive
