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

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from extraction_pipeline.core.errors import ExtractionRuntimeError, PermanentError, TransientError
from extraction_pipeline.core.extraction.assembly import first_prompts
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.answers import answer_key, stored_answer
from extraction_pipeline.core.ledger.audit import record_prompt
from extraction_pipeline.core.ledger.batch_jobs import (
    Entry,
    ProviderBatchRecord,
    drop_intent,
    entries_of,
    finish_preparation,
    known_provider_batch_ids,
    provider_batch_record,
    provider_batches_of,
    record_end,
    record_intent,
    record_poll,
    record_submitted,
    submitted_custom_ids,
    touch_intent,
    unresolved_submissions,
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
    parse_all: Callable[[list[ItemListing]], object] | None = None,
) -> Preparation:
    """Submit the batch's first questions; the batch then waits for the provider (``follow``).
    ``parse_all``, given the documents to ask about, parses them together into the cache first
    (one isolated child for many) so that ``parse`` reads each from there.
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
    # Prompts an earlier attempt noted: those the provider has by id are done; those it may have
    # (noted, its id never kept) are looked for there before anything is sent again.
    unresolved = {record.id: record for record in unresolved_submissions(ledger, batch_id)}
    noted = {entry.custom_id: record_id for record_id in unresolved for entry in entries_of(ledger, record_id)}
    sent_before = submitted_custom_ids(ledger, batch_id) - noted.keys()
    requests: list[BatchRequest] = []
    entries: list[Entry] = []
    already, not_parsed = 0, []
    items = [item for item in batch_item_rows(ledger, batch_id) if item["status"] == ItemStatus.PENDING]
    if parse_all is not None and items:
        parse_all(items)
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
            # The batch's uid in it: results are matched by custom id, and another ledger's batch on
            # the same account (a staging instance) never has the same ones.
            custom_id = f"b{batch['uid'][:12]}-item-{item['id']}-q{question}"
            if custom_id in sent_before:
                continue
            if custom_id not in noted and not batch["fresh"] and stored_answer(ledger, key) is not None:
                already += 1
                continue
            requests.append(BatchRequest(custom_id, messages, template))
            entries.append(Entry(item["id"], custom_id, key))
    by_id = {entry.custom_id: entry for entry in entries}
    submission = _Submission(ledger, batch_id, llm, by_id, progress)
    for record in unresolved.values():
        group = [r for r in requests if noted.get(r.custom_id) == record.id]
        if not submission.settle(record, group):
            break
    else:
        fresh = [r for r in requests if r.custom_id not in noted]
        for group in batch_api.split_requests(llm, fresh) if fresh else []:
            key = submission_key(batch["uid"], [r.custom_id for r in group])
            entries_of_group = [by_id[r.custom_id] for r in group]
            row_id = record_intent(ledger, batch_id=batch_id, model=model, key=key, entries=entries_of_group)
            if row_id is None:
                still = get_batch(ledger, batch_id)
                if still is not None and still["provider_batch"] == ProviderBatchPhase.PREPARING:
                    # Another attempt noted these prompts meanwhile: it sends them, and ends the
                    # preparation; this one leaves both to it.
                    return Preparation(message="another run is submitting this batch's prompts: this one stops")
                submission.note = "cancelled while its prompts were being submitted"  # nothing of it was sent
                break
            noted_now = provider_batch_record(ledger, row_id)
            if noted_now is None or noted_now.ended or not submission.settle(noted_now, group, new=True):
                break
    if not requests and not sent_before:
        submission.note = (
            f"nothing to submit ({already} answers already paid for): the documents go straight to their runs"
        )
    note = submission.note
    finish_preparation(ledger, batch_id, message=note if not submission.batch_ids and not sent_before else None)
    return Preparation(
        prompts=submission.prompts,
        already_paid=already,
        provider_batch_ids=tuple(submission.batch_ids),
        not_parsed=tuple(not_parsed),
        message=note or "",
    )


def submission_key(batch_uid: str, custom_ids: list[str]) -> str:
    """The key a group of a batch's prompts is tagged with at the provider: the batch and which
    prompts (the same group asked again has the same key)."""
    digest = hashlib.sha256("\n".join(custom_ids).encode()).hexdigest()[:16]
    return f"{batch_uid}-{digest}"


@dataclass
class _Submission:
    """``prepare``'s sending of one batch's groups: each noted before it is sent, adopted when the
    provider already has it, and kept by id the moment the provider gives one."""

    ledger: Ledger
    batch_id: int
    llm: LLMConfig
    by_id: dict[str, Entry]
    progress: Callable[[str], None]
    note: str | None = None
    prompts: int = 0
    batch_ids: list[str] = field(default_factory=list)

    def settle(self, record: ProviderBatchRecord, group: list[BatchRequest], *, new: bool = False) -> bool:
        """Send the noted submission ``record`` (``group``: its prompts, rebuilt), or adopt the
        provider batch an earlier attempt created for it. False: stop sending (the provider
        refused, or the batch was cancelled). A TransientError is raised with the note kept: the
        next attempt looks for it at the provider first."""
        key = record.submission_key or ""
        found = None
        if not new:
            try:
                found = batch_api.find(
                    self.llm,
                    key,
                    since=record.submitted_at,
                    count=record.requests,
                    known=known_provider_batch_ids(self.ledger),
                )
            except PermanentError as exc:
                # Whether the provider has them cannot be known: sending them again could pay twice.
                give_up(self.ledger, record, f"the provider cannot say whether it has them: {exc}")
                self.note = f"{record.requests} prompts not sent again ({exc}): they are asked by ordinary calls"
                return False
        if found is not None:
            self.progress(
                f"provider batch {found.batch_id} was submitted by an earlier attempt whose answer was lost: "
                "it is followed, not sent again"
            )
        elif not group:
            drop_intent(self.ledger, record.id)
            return True
        else:
            if not new:  # a later batch of it is looked for from now on, not from the first note
                touch_intent(self.ledger, record.id)
            try:
                found = batch_api.submit(self.llm, group, key)
            except PermanentError as exc:  # refused: the provider has nothing of it
                drop_intent(self.ledger, record.id)
                self.note = f"the provider refused {len(group)} prompts ({exc}): they are asked by ordinary calls"
                return False  # what was submitted before is followed
            # Said before it is kept: should this process die in between, the id is in the run's log.
            self.progress(f"submitted provider batch {found.batch_id} ({len(group)} prompts)")
        if not record_submitted(
            self.ledger,
            record.id,
            provider_batch_id=found.batch_id,
            input_file_id=found.input_file_id,
            created_at=found.submitted_at,
        ):  # cancelled while this group was being sent: it is not wanted
            self.note = "cancelled while its prompts were being submitted"
            if not _cancel_unrecorded(self.llm, found.batch_id, self.progress):
                self.note += f"; provider batch {found.batch_id} could not be cancelled: cancel it at the provider"
            return False
        for request in group:  # the prompt audit holds every prompt sent, whichever way
            record_prompt(
                self.ledger,
                item_id=self.by_id[request.custom_id].item_id,
                run_id=f"provider batch {found.batch_id}",
                model=self.llm.effective_model,
                messages=request.messages,
            )
        self.batch_ids.append(found.batch_id)
        self.prompts += record.requests
        return True


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


def look(ledger: Ledger, record: ProviderBatchRecord, llm: LLMConfig, *, now: datetime | None = None) -> bool:
    """Ask the provider how ``record`` stands, without downloading anything: True when it has
    ended there and its results wait to be collected (``follow``). Its status is kept either way.
    A submission noted but never known by id is settled here (adopted, or ended); a batch the
    provider no longer knows, or one unreachable for ``GIVE_UP_AFTER``, is given up."""
    if record.unresolved:
        _settle_unresolved(ledger, record, llm.for_model(record.model), now=now)
        return False
    try:
        state = batch_api.poll(llm.for_model(record.model), record.provider_batch_id)
    except TransientError as exc:
        if (now or utcnow()) - record.submitted_at < GIVE_UP_AFTER:
            raise
        give_up(ledger, record, f"not reachable {GIVE_UP_AFTER} after its submission: {exc}")
        return False
    except PermanentError as exc:
        give_up(ledger, record, f"the provider cannot give its answers: {exc}")
        return False
    record_poll(ledger, record.id, state.status.value)
    return state.status.ended


def waiting_to_be_collected(record: ProviderBatchRecord) -> bool:
    """True when ``record`` has ended at the provider (as last asked) and its answers are not yet
    stored here."""
    try:
        return not record.ended and ProviderJobStatus(record.status).ended
    except ValueError:  # "submitting", "given up", a note
        return False


def follow(ledger: Ledger, record: ProviderBatchRecord, llm: LLMConfig, *, now: datetime | None = None) -> bool:
    """Ask the provider how ``record`` stands; once it has ended, store what it answered (True).
    The config's model is the one the batch was submitted with, whatever is configured now. A
    provider that says it has no such batch (or whose files are gone), or one not reachable for
    ``GIVE_UP_AFTER`` past the submission, ends it here: every prompt goes to ordinary calls."""
    config = llm.for_model(record.model)
    if record.unresolved:
        return _settle_unresolved(ledger, record, config, now=now)
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


def _settle_unresolved(
    ledger: Ledger, record: ProviderBatchRecord, config: LLMConfig, *, now: datetime | None = None
) -> bool:
    """A submission noted whose submit run ended before the provider's id was kept (it died, or
    gave up): adopt the provider batch made of it, or, when the provider has none, end it here
    (True) so that its prompts are asked by ordinary calls."""
    try:
        found = batch_api.find(
            config,
            record.submission_key or "",
            since=record.submitted_at,
            count=record.requests,
            known=known_provider_batch_ids(ledger),
        )
    except TransientError as exc:
        if (now or utcnow()) - record.submitted_at < GIVE_UP_AFTER:
            raise
        return give_up(ledger, record, f"not reachable {GIVE_UP_AFTER} after its submission: {exc}")
    except PermanentError as exc:
        return give_up(ledger, record, f"the provider cannot say whether it has the prompts: {exc}")
    if found is None:
        return give_up(ledger, record, "their submission never reached the provider")
    record_submitted(
        ledger,
        record.id,
        provider_batch_id=found.batch_id,
        input_file_id=found.input_file_id,
        created_at=found.submitted_at,
    )
    return False  # followed from now on, like any submitted batch


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
        if record.unresolved:  # the provider may have it under its key: cancelled there if so
            _settle_unresolved(ledger, record, llm.for_model(record.model))
            adopted = provider_batch_record(ledger, record.id)
            if adopted is None or adopted.ended or adopted.unresolved:
                done.append(f"{record.requests} prompts being submitted: not sent, asked by ordinary calls")
                continue
            record = adopted
        try:
            state = batch_api.cancel(llm.for_model(record.model), record.provider_batch_id)
        except PermanentError as exc:  # it no longer knows the batch, or this key may not see it
            give_up(ledger, record, f"cancelled here; the provider did not take the cancel ({exc})")
            done.append(f"provider batch {record.provider_batch_id}: given up here (the provider said: {exc})")
            continue
        record_poll(ledger, record.id, state.status.value)
        done.append(f"provider batch {record.provider_batch_id}: {state.status.value}")
    return done
