"""A batch's first questions asked through the provider's batch API, at its batch price.

``prepare`` builds every document's first prompts exactly as the extraction will send them
(``first_prompts``), leaves out those whose answer is already paid for, and submits the rest as
provider batches (split where one would exceed the provider's limits). ``follow`` asks the
provider how a submitted batch stands and, once it has ended, stores its answers as the answers
paid for those prompts (``core/ledger/batch_jobs.py``); the documents' runs then ground them
like any answer. Everything the provider did not answer is asked by those runs as an ordinary call.
Follow-up questions, second models and repair calls depend on a first answer: they stay ordinary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from extraction_pipeline.core.errors import ExtractionRuntimeError, PermanentError, TransientError
from extraction_pipeline.core.extraction.assembly import first_prompts
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.answers import answer_key, stored_answer
from extraction_pipeline.core.ledger.audit import record_prompt
from extraction_pipeline.core.ledger.batch_jobs import (
    Entry,
    ProviderBatchRecord,
    entries_of,
    finish_preparation,
    provider_batches_of,
    record_end,
    record_poll,
    record_submission,
    submitted_custom_ids,
)
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.ledger.database import utcnow
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.rows import ItemListing
from extraction_pipeline.core.ledger.schema import ItemStatus, ProviderBatchPhase
from extraction_pipeline.core.ledger.templates import definition_of, template_of_item
from extraction_pipeline.core.llm import batch_api
from extraction_pipeline.core.llm.batch_model import BatchAnswer, BatchFailure, BatchRequest, ProviderJobStatus
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.parsing import ParsedDocument


@dataclass(frozen=True)
class Preparation:
    """What ``prepare`` did, in figures a person reads."""

    prompts: int = 0  # submitted to the provider
    already_paid: int = 0  # prompts whose answer was stored already: no call at all
    provider_batch_ids: tuple[str, ...] = ()
    not_parsed: tuple[str, ...] = ()  # their runs fail them as usual
    message: str = ""

    def describe(self) -> str:
        if self.message:
            return self.message
        return (
            f"{self.prompts} prompts submitted as provider batch(es) {', '.join(self.provider_batch_ids)}; "
            f"{self.already_paid} already answered; {len(self.not_parsed)} documents not parsed"
        )


def prepare(
    ledger: Ledger,
    batch_id: int,
    llm: LLMConfig,
    parse: Callable[[ItemListing], ParsedDocument],
    progress: Callable[[str], None] = lambda _: None,
) -> Preparation:
    """Submit the batch's first questions; the batch then waits for the provider (``follow``).
    A model without a batch API, or a batch with nothing left to ask, ends the waiting at once:
    its documents are asked by ordinary calls. A transient failure (the provider down) is raised
    for the caller's retries: what was submitted before it is recorded and never sent again. A
    permanent one ends the waiting for what was not submitted."""
    batch = get_batch(ledger, batch_id)
    if batch is None or batch["provider_batch"] != ProviderBatchPhase.PREPARING:
        return Preparation(message=f"batch {batch_id} is not waiting to be submitted")
    model = llm.effective_model
    if llm.is_offline or not batch_api.supports_provider_batches(model):
        message = f"{model} has no provider batch API here: its documents are asked by ordinary calls"
        finish_preparation(ledger, batch_id, message=message)
        return Preparation(message=message)
    sent_before = submitted_custom_ids(ledger, batch_id)  # by an attempt before this one
    requests: list[BatchRequest] = []
    entries: list[Entry] = []
    already, not_parsed = 0, []
    items = [item for item in batch_item_rows(ledger, batch_id) if item["status"] == ItemStatus.PENDING]
    for number, item in enumerate(items, start=1):
        progress(f"preparing {number}/{len(items)}: {item['filename']}")
        try:
            parsed = parse(item)
            template = definition_of(template_of_item(ledger, item["id"]))
            prompts = first_prompts(template, parsed, llm)
        except PermanentError as exc:  # its run fails it as usual; the others go on
            not_parsed.append(f"{item['filename']}: {exc}")
            continue
        for question, messages in enumerate(prompts, start=1):
            key = answer_key(model, messages)
            custom_id = f"item-{item['id']}-q{question}"
            if custom_id in sent_before:
                continue
            if not batch["fresh"] and stored_answer(ledger, key) is not None:
                already += 1
                continue
            requests.append(BatchRequest(custom_id, messages, template))
            entries.append(Entry(item["id"], custom_id, key))
    by_id = {entry.custom_id: entry for entry in entries}
    submitted_ids: list[str] = []
    submitted_count = 0
    note: str | None = None
    for group in batch_api.split_requests(llm, requests) if requests else []:
        try:
            submitted = batch_api.submit(llm, group)
        except PermanentError as exc:
            note = f"the provider refused {len(group)} prompts ({exc}): they are asked by ordinary calls"
            break  # what was submitted before is followed
        # Said before it is recorded: should this process die in between, the id is in the run's log.
        progress(f"submitted provider batch {submitted.batch_id} ({len(group)} prompts)")
        recorded = record_submission(
            ledger,
            batch_id=batch_id,
            model=model,
            provider_batch_id=submitted.batch_id,
            input_file_id=submitted.input_file_id,
            status=ProviderJobStatus.VALIDATING.value,
            entries=[by_id[request.custom_id] for request in group],
        )
        if recorded is None:  # cancelled while this group was uploading: it is not wanted
            note = "cancelled while its prompts were being submitted"
            if not _cancel_unrecorded(llm, submitted.batch_id, progress):
                note += f"; provider batch {submitted.batch_id} could not be cancelled: cancel it at the provider"
            break
        for request in group:  # the prompt audit holds every prompt sent, whichever way
            record_prompt(
                ledger,
                item_id=by_id[request.custom_id].item_id,
                run_id=f"provider batch {submitted.batch_id}",
                model=model,
                messages=request.messages,
            )
        submitted_ids.append(submitted.batch_id)
        submitted_count += len(group)
    if not requests and not sent_before:
        note = f"nothing to submit ({already} answers already paid for): the documents go straight to their runs"
    finish_preparation(ledger, batch_id, message=note if not submitted_ids and not sent_before else None)
    return Preparation(
        prompts=submitted_count,
        already_paid=already,
        provider_batch_ids=tuple(submitted_ids),
        not_parsed=tuple(not_parsed),
        message=note or "",
    )


def _cancel_unrecorded(llm: LLMConfig, batch_id: str, progress: Callable[[str], None], attempts: int = 3) -> bool:
    """Cancel a provider batch the ledger will not follow (its batch was cancelled meanwhile): a
    few tries, since nothing else will ever cancel it; False (and said) when they all fail."""
    for attempt in range(1, attempts + 1):
        try:
            batch_api.cancel(llm, batch_id)
            return True
        except ExtractionRuntimeError as exc:
            progress(f"cancelling provider batch {batch_id} (attempt {attempt} of {attempts}) failed: {exc}")
            if isinstance(exc, PermanentError):
                return False
            time.sleep(min(2.0**attempt, 10.0))
    return False


# A provider batch not answered this long after it was submitted (OpenAI's window is 24 h) is given
# up here: its prompts are asked by ordinary calls.
GIVE_UP_AFTER = timedelta(hours=26)


def follow(ledger: Ledger, record: ProviderBatchRecord, llm: LLMConfig, *, now: datetime | None = None) -> bool:
    """Ask the provider how ``record`` stands; once it has ended, store what it answered (True).
    The config's model is the one the batch was submitted with, whatever is configured now. A
    provider that says it has no such batch (or whose files are gone), or one not reachable for
    ``GIVE_UP_AFTER`` past the submission, ends it here: every prompt goes to ordinary calls."""
    config = replace(llm, model=record.model)
    try:
        state = batch_api.poll(config, record.provider_batch_id)
        if not state.status.ended:
            record_poll(ledger, record.id, state.status.value)
            return False
        templates = {
            entry.custom_id: definition_of(template_of_item(ledger, entry.item_id))
            for entry in entries_of(ledger, record.id)
        }
        outcomes = batch_api.collect(config, state, templates)
    except TransientError as exc:
        if (now or utcnow()) - record.submitted_at < GIVE_UP_AFTER:
            raise
        return give_up(ledger, record, f"not reachable {GIVE_UP_AFTER} after its submission: {exc}")
    except PermanentError as exc:
        return give_up(ledger, record, f"the provider cannot give its answers: {exc}")
    answered = [o for o in outcomes if isinstance(o, BatchAnswer)]
    failures = [o for o in outcomes if isinstance(o, BatchFailure)]
    return record_end(
        ledger,
        record,
        status=state.status.value,
        answered=answered,
        fallen_back={f.custom_id: f"{f.kind.value}: {f.message}" for f in failures},
        # A cut or invalid answer was paid for even though an ordinary call asks again.
        paid={f.custom_id: f.usage for f in failures if f.usage is not None},
        message="; ".join(state.errors[:3]) or None,
    )


def give_up(ledger: Ledger, record: ProviderBatchRecord, reason: str) -> bool:
    """End ``record`` here with nothing answered: its prompts are asked by ordinary calls."""
    entries = entries_of(ledger, record.id)
    return record_end(
        ledger,
        record,
        status="given up",
        answered=[],
        fallen_back={entry.custom_id: reason for entry in entries},
        message=reason,
    )


def cancel_provider_batches(ledger: Ledger, batch_id: int, llm: LLMConfig) -> list[str]:
    """Stop waiting for the provider: cancel the batch's open provider batches there (answers
    already written are kept when it reports them; the rest are asked by ordinary calls) or, not
    yet submitted, end the waiting. A provider that refuses the cancel (it no longer knows the
    batch) is given up here; one that cannot be reached raises TransientError (try again: the
    batch stays followed, and is given up a day after its submission). What was done, one line
    each."""
    done = []
    if finish_preparation(ledger, batch_id, message="cancelled before it was submitted"):
        done.append("cancelled before it was submitted: its documents are asked by ordinary calls")
    for record in provider_batches_of(ledger, batch_id):
        if record.ended:
            continue
        try:
            state = batch_api.cancel(replace(llm, model=record.model), record.provider_batch_id)
        except PermanentError as exc:  # it no longer knows the batch, or this key may not see it
            give_up(ledger, record, f"cancelled here; the provider did not take the cancel ({exc})")
            done.append(f"provider batch {record.provider_batch_id}: given up here (the provider said: {exc})")
            continue
        record_poll(ledger, record.id, state.status.value)
        done.append(f"provider batch {record.provider_batch_id}: {state.status.value}")
    return done
