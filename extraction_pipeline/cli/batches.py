"""Commands on batches: create, watch, export; the item history across batches."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from extraction_pipeline.cli.common import (
    EXIT_USAGE,
    AddCommand,
    CliError,
    add_group,
    iso_date,
    non_empty,
    non_negative_float,
    open_ledger,
    positive_int,
    print_json,
)
from extraction_pipeline.core.ledger.rows import BatchRow, ItemListing
from extraction_pipeline.core.settings import Settings

WORKBOOK_WAIT_SECONDS = 120


def cmd_batch_create(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.batches import create_batch, get_batch
    from extraction_pipeline.core.ledger.documents import project_documents, projects_of
    from extraction_pipeline.core.ledger.templates import label_of, template_of_batch
    from extraction_pipeline.instance import require_initialized

    require_initialized(settings)
    if args.second_model is not None and (
        not args.second_model.strip() or args.second_model.strip() == (settings.model or "")
    ):
        raise CliError("--second-model must name another model than EXTRACTION_MODEL", EXIT_USAGE)
    if args.quick and not args.estimate:
        raise CliError("--quick goes with --estimate: it says how the estimate reads unparsed PDFs", EXIT_USAGE)
    if not args.estimate:
        # Only a launch needs them: an estimate creates nothing, so it has no owner and no key.
        for flag, value in (("--user", args.user), ("--idempotency-key", args.idempotency_key)):
            if value is None:
                raise CliError(f"{flag} is required to create a batch (not with --estimate)", EXIT_USAGE)
    ledger = open_ledger(settings)
    if args.documents:
        doc_ids = args.documents
        projects = projects_of(ledger, doc_ids)
        foreign = [
            f"{doc_id} ({projects[doc_id]})"
            for doc_id in dict.fromkeys(doc_ids)
            if doc_id in projects and projects[doc_id] != args.project
        ]
        if foreign:
            raise CliError(f"document(s) of another project: {', '.join(foreign[:10])}", EXIT_USAGE)
        unknown = [doc_id for doc_id in dict.fromkeys(doc_ids) if doc_id not in projects]
        if unknown and args.estimate:  # create_batch says the same when the insert is refused
            raise CliError(f"unknown document id(s): {', '.join(map(str, unknown[:10]))}", EXIT_USAGE)
    else:
        doc_ids = project_documents(ledger, args.project)
        if not doc_ids:
            raise CliError(f"project {args.project!r} has no documents: add some with `documents add`")
    if args.estimate:
        return _print_estimate(args, settings, ledger, doc_ids)
    if args.provider_batch:
        from extraction_pipeline.core.llm.batch_api import supports_provider_batches

        if not supports_provider_batches(settings.model):
            raise CliError(
                f"--provider-batch: {settings.model or 'the offline extractor'} has no provider batch API here "
                "(openai/... and anthropic/... models only): create the batch without it",
                EXIT_USAGE,
            )
    ref = create_batch(
        ledger,
        idempotency_key=args.idempotency_key,
        project=args.project,
        user=args.user,
        document_ids=doc_ids,
        fresh=args.fresh,
        second_model=args.second_model,
        adjudicator_model=args.adjudicator,
        follow_up=args.follow_up,
        provider_batch=args.provider_batch,
    )
    template = label_of(template_of_batch(ledger, ref.id))
    batch = get_batch(ledger, ref.id)
    documents = batch["total_items"] if batch else len(doc_ids)  # an existing batch keeps its own set
    if args.json:
        print_json({"batch_id": ref.id, "created": ref.created, "documents": documents, "template": template})
    elif ref.created:
        if batch and batch["provider_batch"]:
            print(
                f"batch {ref.id} created; {documents} document(s): their prompts go to the provider's batch API "
                "(half price, answers within 24 h), then their runs ground the answers"
            )
        else:
            print(f"batch {ref.id} created; {documents} document(s) queued for the batch_dispatcher sensor")
        print(f"template: {template}")
    else:
        print(f"batch {ref.id} already exists (same idempotency key) with {documents} document(s); nothing added")
        print(f"template: {template}")
    _warn_if_no_daemon(settings)
    if not settings.model:
        from extraction_pipeline.core.llm.offline import OFFLINE_WARNING

        print(f"note: {OFFLINE_WARNING}", file=sys.stderr)
    return 0


def _print_estimate(args: argparse.Namespace, settings: Settings, ledger: Any, doc_ids: list[int]) -> int:
    """`batch create --estimate`: what the batch would send, cost and take, with the same project,
    documents, model(s) and template as the launch; nothing is created. Unparsed PDFs are parsed
    (cached for the batch's runs) unless --quick, which counts their plain text (approximate)."""
    from extraction_pipeline.cli.estimate_report import as_json, describe
    from extraction_pipeline.core.extraction.estimate import estimate_batch
    from extraction_pipeline.core.extraction.token_counts import ParseMode

    llm = settings.llm()

    def progress(done: int, total: int, filename: str) -> None:
        # stderr: stdout may be JSON. Every document of a few, every 10th (and the last) of many.
        if total > 3 and (total <= 20 or done % 10 == 0 or done == total):
            print(f"parsing {done}/{total}: {filename}", file=sys.stderr, flush=True)

    estimate = estimate_batch(
        ledger,
        project=args.project,
        document_ids=doc_ids,
        llm=llm,
        second_model=args.second_model.strip() if args.second_model else None,
        fresh=args.fresh,
        parse=ParseMode.QUICK if args.quick else ParseMode.PARSE,
        parse_options=settings.parse_options(),
        pinned_budget=(settings.tokens_per_minute or None, settings.requests_per_minute or None),
        llm_slots=_llm_slots(settings),
        progress=progress,
        follow_up=args.follow_up,
    )
    if args.json:
        print_json(as_json(estimate))
    else:
        print("\n".join(describe(estimate)))
        print("nothing was created: run the same command without --estimate to start the batch")
    if not settings.model:
        from extraction_pipeline.core.llm.offline import OFFLINE_WARNING

        print(f"note: {OFFLINE_WARNING}", file=sys.stderr)
    return 0


def _llm_slots(settings: Settings) -> int | None:
    """The `llm` pool's limit as the instance has it (None when it cannot be read)."""
    from extraction_pipeline.instance import pool_limits

    try:
        return pool_limits(settings).get("llm") or None
    except Exception:  # the instance's storage cannot be read: the estimate says slots are unknown
        return None


NO_DAEMON = (
    "note: no daemon is running on this home, so nothing will move: start `extraction-pipeline daemon` "
    "(or `ui`) in another terminal"
)


def _warn_if_no_daemon(settings: Settings) -> bool:
    """On stderr (stdout may be JSON): a batch waits at 0 % forever without a daemon."""
    from extraction_pipeline.instance import daemon_running

    if daemon_running(settings):
        return False
    print(NO_DAEMON, file=sys.stderr, flush=True)
    return True


def _bar(fraction: float, width: int = 30) -> str:
    filled = round(fraction * width)
    return "#" * filled + "-" * (width - filled)


def cmd_batch_status(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.batch_jobs import describe_provider_batches
    from extraction_pipeline.core.ledger.batches import describe_state, get_batch
    from extraction_pipeline.core.ledger.budgets import what_calls_wait_for
    from extraction_pipeline.core.ledger.queries import error_reasons, progress

    ledger = open_ledger(settings)
    closed_at: float | None = None
    said = ""  # the export state last printed (--watch prints each change once)
    if args.watch:
        _warn_if_no_daemon(settings)
    while True:
        batch = get_batch(ledger, args.batch)
        if batch is None:
            raise CliError(f"unknown batch {args.batch}", EXIT_USAGE)
        counts = progress(ledger, args.batch)
        # With --watch a closed batch is followed until its workbook is written.
        awaiting_workbook = batch["status"] == "exporting"
        state = describe_state(batch)
        waiting = what_calls_wait_for(ledger) if batch["status"] == "open" else []
        provider = describe_provider_batches(ledger, batch)
        errors = error_reasons(ledger, args.batch) if counts.error else []
        if args.json:
            if not (args.watch and awaiting_workbook and closed_at is not None):
                print_json(
                    {
                        "batch": batch,
                        "state": state,
                        "progress": counts.as_dict(),
                        "waiting_for": waiting,
                        "provider_batches": provider,
                        "errors": [{"message": e.message, "documents": e.documents} for e in errors],
                    }
                )
        elif closed_at is None or batch["status"] == "completed":
            line = (
                f"batch {args.batch} [{_bar(counts.percent / 100)}] {counts.percent:5.1f}%  "
                f"{counts.done}/{counts.total} done  pending {counts.pending}  extracting {counts.extracting}  "
                f"completed {counts.completed}  error {counts.error}  {batch['status']}"
            )
            end = "\r" if args.watch and sys.stdout.isatty() and batch["status"] == "open" and not waiting else "\n"
            print(line, end=end, flush=True)
            abandoned = (
                [f"{counts.abandoned_calls} calls abandoned after the timeout (the provider may have billed them)"]
                if counts.abandoned_calls
                else []
            )
            failed = [f"{e.documents} document(s) in error: {e.message}" for e in errors]
            others = counts.error - sum(e.documents for e in errors)
            if others > 0:
                listing = f"history --batch {args.batch} --status error"
                failed.append(f"{others} more document(s) in error for other reasons (`{listing}`)")
            for text in [*waiting, *provider, *abandoned, *failed]:
                print(f"  {text}", flush=True)
        if awaiting_workbook and not args.json and state != said:
            print(f"  {state}", flush=True)
            said = state
        if not args.watch or batch["status"] == "open":
            if not args.watch:
                _print_workbook(batch, args.json)
                return 0
            time.sleep(args.interval)
            continue
        if not awaiting_workbook:
            _print_workbook(batch, args.json)
            return 0
        if closed_at is None:
            closed_at = time.monotonic()
        elif time.monotonic() - closed_at > WORKBOOK_WAIT_SECONDS:
            if not args.json:
                hint = "the daemon keeps retrying it" if batch.get("export_error") else "is the daemon running?"
                print(f"no workbook yet: {hint} `batch export {args.batch}` writes it now")
            return 0
        time.sleep(args.interval)


def cmd_batch_cancel_provider(args: argparse.Namespace, settings: Settings) -> int:
    """Stop waiting for the provider's batch API: its batches are cancelled there; what they
    answered before the cancel is kept, the rest is asked by ordinary calls."""
    from extraction_pipeline.core.errors import ExtractionRuntimeError
    from extraction_pipeline.core.extraction.batch_job_flow import cancel_provider_batches
    from extraction_pipeline.core.ledger.batches import get_batch

    ledger = open_ledger(settings)
    batch = get_batch(ledger, args.batch)
    if batch is None:
        raise CliError(f"unknown batch {args.batch}", EXIT_USAGE)
    if batch["provider_batch"] is None:
        raise CliError(f"batch {args.batch} was not sent to a provider's batch API", EXIT_USAGE)
    try:
        done = cancel_provider_batches(ledger, args.batch, settings.llm())
    except ExtractionRuntimeError as exc:
        raise CliError(f"the provider did not take the cancel: {exc}") from exc
    if not done:
        print(f"batch {args.batch}: its provider batches have ended already; nothing to cancel")
    for line in done:
        print(f"batch {args.batch}: {line} (cancelled by {args.user})")
    return 0


def cmd_batch_retry(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.reopening import retry_failed

    report = retry_failed(
        open_ledger(settings),
        args.batch,
        actor=args.user,
        document_ids=args.documents,
        allow_superseded=args.allow_superseded_template,
    )
    if args.json:
        print_json(
            {
                "batch": report.batch_id,
                "retried": report.retried,
                "not_in_error": report.not_in_error,
                "reopened": report.reopened,
            }
        )
        return 0
    if not report.retried:
        print(f"nothing to retry: no {'named ' if args.documents else ''}document of batch {args.batch} is in error")
    else:
        ids = ", ".join(map(str, report.retried[:20])) + (" ..." if len(report.retried) > 20 else "")
        print(f"batch {args.batch} reopened: {len(report.retried)} document(s) back in the queue ({ids})")
        print("the daemon's batch_dispatcher starts them; a new workbook version is written when the batch closes")
    if report.not_in_error:
        print(f"not in error, left as they are: {', '.join(map(str, report.not_in_error[:20]))}")
    return 0


def _print_workbook(batch: BatchRow, as_json: bool) -> None:
    if not as_json and batch.get("export_path"):
        print(f"workbook: {batch['export_path']}")


def cmd_batch_export(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.export.closing import ExportError, ExportResult, failure_reason, write_batch_workbook
    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.ledger.batches import get_batch

    if args.output is not None and Path(args.output).suffix.lower() != ".xlsx":
        raise CliError(f"output must end in .xlsx: {args.output}", EXIT_USAGE)
    ledger = open_ledger(settings)
    batch = get_batch(ledger, args.batch)
    if batch is None:
        raise CliError(f"unknown batch {args.batch}", EXIT_USAGE)
    if args.output is None and batch["status"] == "exporting":
        # Closed without its workbook (its export failed, or the daemon has not got to it): this
        # writes the batch's own workbook, exactly as the aggregator would, and completes the batch.
        try:
            written = write_batch_workbook(ledger, args.batch, settings.exports_dir)
        except ExportError as exc:
            raise CliError(f"batch {args.batch}: {exc} (the batch stays 'exporting'; the daemon retries it)") from None
        if written.result is ExportResult.REOPENED:
            raise CliError(f"batch {args.batch} was reopened meanwhile: its workbook is written when it closes again")
        print(f"batch {args.batch} completed: workbook v{written.version} {written.result.value}", file=sys.stderr)
        print(written.path)
        return 0
    # Otherwise a copy, never over a workbook someone may have opened: a name of its own unless -o says.
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = Path(args.output) if args.output else settings.exports_dir / f"batch-{args.batch}-manual-{stamp}.xlsx"
    try:
        path = write_workbook(ledger, args.batch, target)
    except OSError as exc:
        raise CliError(f"export failed: {failure_reason(exc, target)}") from None
    print(path)
    return 0


HISTORY_COLUMNS = (
    "id",
    "batch_id",
    "project",
    "user",
    "filename",
    "status",
    "attempts",
    "created_at",
    "finished_at",
    "seconds",
    "run_id",
    "message",
)


def _history_row(row: ItemListing) -> dict[str, Any]:
    """An item as `history` shows it: with how long its extraction took (started to finished)."""
    started, finished = row.get("started_at"), row.get("finished_at")
    seconds = round((finished - started).total_seconds(), 1) if started and finished else None
    return {**row, "seconds": seconds}


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    from extraction_pipeline.core.ledger.queries import history

    rows = history(
        open_ledger(settings),
        user=args.user,
        status=args.status,
        filename=args.filename,
        batch_id=args.batch,
        since=args.since,
        until=args.until,
        limit=args.limit,
    )
    shown = [_history_row(row) for row in rows]
    if args.json:
        print_json([{k: row[k] for k in (*HISTORY_COLUMNS, "document_id", "cost_usd")} for row in shown])
    else:
        print("\t".join(HISTORY_COLUMNS))
        for row in shown:
            print("\t".join("" if row[k] is None else str(row[k])[:80] for k in HISTORY_COLUMNS))
    return 0


def register(add: AddCommand) -> None:
    batch_sub = add_group(add, "batch", "Create, watch and export batches.")
    create = add(
        "create",
        cmd_batch_create,
        "Create a batch over a project's documents; the dispatcher sensor starts it.",
        batch_sub,
    )
    create.add_argument("project")
    create.add_argument(
        "--user", type=non_empty, help="who launches it (run tag extraction/user, per-user limit); required to create"
    )
    create.add_argument("--idempotency-key", help="same key = same batch, never a duplicate; required to create")
    create.add_argument(
        "--fresh",
        action="store_true",
        help="ask the model again even where the same prompt was already answered (by default such "
        "an answer is reused: no call, no cost)",
    )
    create.add_argument(
        "--second-model",
        metavar="MODEL",
        help="double extraction: a second litellm model extracts every document independently (same "
        "endpoint and key); disagreements go to the top of the review queue",
    )
    create.add_argument(
        "--adjudicator",
        metavar="MODEL",
        help="with --second-model: a third model suggests which answer is right where the two disagree "
        "(a suggestion shown to the reviewer, never an overwrite)",
    )
    create.add_argument(
        "--follow-up",
        action="store_true",
        help="after each document's answer, ask the same model once more for the outcomes the recall check "
        "lists as possibly missed (one more call per document that has some; its outcomes are grounded and "
        "marked as found by the follow-up)",
    )
    create.add_argument(
        "--provider-batch",
        action="store_true",
        help="send the documents' prompts through the provider's batch API first (OpenAI and Anthropic models: "
        "half price, answers within 24 h); what it does not answer is asked by ordinary calls",
    )
    create.add_argument(
        "--documents", type=positive_int, nargs="+", metavar="ID", help="document ids (default: all of the project)"
    )
    create.add_argument(
        "--estimate",
        action="store_true",
        help="create nothing: print the documents, prompt and answer tokens, cost (ordinary and batch API) and "
        "duration under the model's budget, for the same documents, model(s) and template; PDFs not parsed yet "
        "are parsed (and cached for the batch)",
    )
    create.add_argument(
        "--quick",
        action="store_true",
        help="with --estimate: count PDFs not parsed yet from their plain text instead of parsing them (faster, "
        "approximate: tables left out)",
    )
    create.add_argument("--json", action="store_true")
    status = add(
        "status", cmd_batch_status, "Progress of a batch; --watch shows a live progress bar until it closes.", batch_sub
    )
    status.add_argument("batch", type=positive_int)
    status.add_argument("--watch", action="store_true")
    status.add_argument(
        "--interval", type=non_negative_float, default=2.0, help="seconds between refreshes with --watch"
    )
    status.add_argument("--json", action="store_true")
    export = add(
        "export",
        cmd_batch_export,
        "Write a batch's workbook now: a closed batch still without one (its export failed, say) gets its own "
        "workbook and completes; otherwise a copy at $EXTRACTION_HOME/exports/batch-N-manual-<UTC time>.xlsx.",
        batch_sub,
    )
    export.add_argument("batch", type=positive_int)
    export.add_argument("-o", "--output", help="write a copy to this .xlsx file instead")
    cancel = add(
        "cancel-provider",
        cmd_batch_cancel_provider,
        "Stop waiting for the provider's batch API: cancel the batch's provider batches (answers written "
        "before the cancel are kept; the rest is asked by ordinary calls).",
        batch_sub,
    )
    cancel.add_argument("batch", type=positive_int)
    cancel.add_argument("--user", required=True, type=non_empty, help="who cancels (printed)")
    retry = add(
        "retry",
        cmd_batch_retry,
        "Put a batch's failed documents back in the queue (history kept); the batch reopens and gets a new workbook.",
        batch_sub,
    )
    retry.add_argument("batch", type=positive_int)
    retry.add_argument("--user", required=True, type=non_empty, help="who asks for the retry (recorded in the history)")
    retry.add_argument("--documents", type=positive_int, nargs="+", metavar="ID", help="only these documents")
    retry.add_argument(
        "--allow-superseded-template",
        action="store_true",
        help="retry even though the project's template changed since the batch started (the batch keeps its version)",
    )
    retry.add_argument("--json", action="store_true")

    hist = add(
        "history", cmd_history, "Items across batches, newest first, filtered by user, status, filename, batch, dates."
    )
    hist.add_argument("--user")
    hist.add_argument("--status", choices=["pending", "extracting", "completed", "error"])
    hist.add_argument("--filename", help="substring of the filename")
    hist.add_argument("--batch", type=positive_int)
    hist.add_argument("--since", type=iso_date, help="created at or after (UTC), e.g. 2026-11-30")
    hist.add_argument("--until", type=iso_date, help="created before (UTC)")
    hist.add_argument("--limit", type=positive_int, default=200)
    hist.add_argument("--json", action="store_true")
