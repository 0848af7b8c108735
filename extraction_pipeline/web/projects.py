"""Projects: create one, upload PDFs, edit its template, set model budgets, start a batch — no
shell needed.

Every action goes through the same core functions as the command line (``register_pdf``,
``save_version``, ``create_batch``), so a batch started here is dispatched, monitored in the
Dagster UI and exported exactly like one created with ``batch create``. Uploads and launches are
recorded under the signed-in user; template edits and budgets are an admin's.

Before the launch button the page shows the price of the launch (``core/extraction/estimate.py``,
in web/estimate_text.py's words)
for the documents and model(s) the form would start; "Update the estimate" sends the form's
choices back to this page (a GET: it changes nothing). A page must answer in seconds, so PDFs not
parsed yet are counted from their plain text and marked approximate, and each upload parses its
new PDFs in the background (cached by content, as a run would), so the next visit is exact and
the batch's runs find them parsed.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from python_multipart.exceptions import MultipartParseError
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError, ExtractionError
from extraction_pipeline.core.extraction.estimate import BatchEstimate, estimate_batch
from extraction_pipeline.core.extraction.token_counts import ParseMode
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.budgets import Budget, all_budgets, configure
from extraction_pipeline.core.ledger.documents import project_exists
from extraction_pipeline.core.ledger.queries import progress, project_documents, projects_overview, recent_batches
from extraction_pipeline.core.ledger.templates import (
    current_template,
    definition_from_project_file,
    latest_version,
    save_version,
)
from extraction_pipeline.core.llm.offline import OFFLINE_WARNING
from extraction_pipeline.core.pdf.parsing import parse_documents
from extraction_pipeline.core.pdf.registration import validate_project
from extraction_pipeline.core.pdf.uploads import UploadVerdict, register_staged, staging_area
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.deps import admin, ledger_of, settings_of, signed_in, user_of
from extraction_pipeline.web.estimate_text import (
    ROLES,
    answer_source,
    budget_source,
    cache_words,
    duration,
    duration_words,
    money,
    notes,
    price_note,
    template_label,
)
from extraction_pipeline.web.forms import CROSS_SITE, clear_flash, read_flash, read_form, same_origin, set_flash
from extraction_pipeline.web.pages import not_found_page
from extraction_pipeline.web.templating import render
from extraction_pipeline.web.upload_stream import UploadTooLarge, stream_files, too_big
from extraction_pipeline.web.urls import PREFIX, project_url

MAX_UPLOAD_FILES = 500
MAX_TEMPLATE_CHARS = 100_000
MAX_MODEL_CHARS = 200

log = logging.getLogger(__name__)


def _model_context(settings: Settings) -> dict[str, Any]:
    # The warning begins "no model configured: ...": said once, not twice.
    return {"model": settings.model, "offline_warning": OFFLINE_WARNING[0].upper() + OFFLINE_WARNING[1:]}


@dataclass(frozen=True)
class UploadRow:
    """One uploaded file's verdict, as the project page shows it after the upload."""

    filename: str
    result: str  # "registered", "duplicate" or "refused"
    detail: str


REGISTERED, DUPLICATE, REFUSED = "registered", "duplicate", "refused"
UPLOAD_COOKIE = "extraction_upload"  # the last upload's verdicts, for the page the browser is sent to
UPLOAD_COOKIE_CHARS = 3500  # a cookie holds about 4 KB: the first files' verdicts, then a count


def _upload_rows(verdicts: list[UploadVerdict]) -> list[UploadRow]:
    rows = []
    for verdict in verdicts:
        doc = verdict.document
        if doc is None:
            rows.append(UploadRow(verdict.filename, REFUSED, verdict.reason or ""))
        elif doc.created:
            rows.append(UploadRow(verdict.filename, REGISTERED, f"registered as document {doc.id} ({doc.pages} pages)"))
        elif doc.registered_name != doc.filename:
            detail = f"already registered as {doc.registered_name} (document {doc.id}): stored once"
            rows.append(UploadRow(verdict.filename, DUPLICATE, detail))
        else:
            rows.append(UploadRow(verdict.filename, DUPLICATE, f"already registered (document {doc.id}): stored once"))
    return rows


def _upload_summary(rows: list[UploadRow], user: str) -> str:
    """ "2 of 4 file(s) registered by Ada; 1 already registered (a duplicate, stored once); 1 refused"."""
    counts = {result: sum(1 for row in rows if row.result == result) for result in (REGISTERED, DUPLICATE, REFUSED)}
    said = f"{counts[REGISTERED]} of {len(rows)} file(s) registered by {user}"
    if counts[DUPLICATE]:
        kind = "duplicates" if counts[DUPLICATE] > 1 else "a duplicate"
        said += f"; {counts[DUPLICATE]} already registered ({kind}, stored once)"
    if counts[REFUSED]:
        said += f"; {counts[REFUSED]} refused"
    return said


def _set_upload_rows(response: Response, rows: list[UploadRow], project: str) -> None:
    """The verdicts for the page after the redirect (post, redirect, get): as many as a cookie
    holds (measured as sent: quoted), then how many more there were."""
    kept: list[list[str]] = []
    for number, row in enumerate(rows):
        cell = [row.filename, row.result, row.detail]
        more = ["…", "", f"{len(rows) - number} more file(s): see the documents below"]
        if len(quote(json.dumps([*kept, cell, more]))) > UPLOAD_COOKIE_CHARS:
            kept.append(more)
            break
        kept.append(cell)
    # Only the project's own page reads it: another project's page never shows (or drops) it.
    response.set_cookie(
        UPLOAD_COOKIE, quote(json.dumps(kept)), httponly=True, samesite="strict", path=project_url(project)
    )


def _read_upload_rows(request: Request) -> list[UploadRow]:
    raw = unquote(request.cookies.get(UPLOAD_COOKIE, ""))
    if not raw or len(raw) > 2 * UPLOAD_COOKIE_CHARS:
        return []
    try:
        kept = json.loads(raw)
        return [UploadRow(str(a), str(b), str(c)) for a, b, c in kept][: MAX_UPLOAD_FILES + 1]
    except (ValueError, TypeError, RecursionError):
        return []  # not ours, or damaged (a cookie is the browser's to send): nothing to show


async def list_projects(request: Request) -> Response:
    return _projects_page(request)


def _projects_page(request: Request, error: str | None = None, status_code: int = 200) -> Response:
    return render(
        "projects.html",
        title="Projects",
        projects=projects_overview(ledger_of(request)),
        error=error,
        status_code=status_code,
        user=user_of(request),
        **_model_context(settings_of(request)),
    )


async def create_project(request: Request) -> Response:
    user = signed_in(request)  # who asks, before anything of the form is read
    if isinstance(user, Response):
        return user
    form = await read_form(request)
    name = str(form.get("project") or "").strip()
    try:
        validate_project(name)
    except ConfigError as exc:
        return _projects_page(request, str(exc), 400)
    current_template(ledger_of(request), name)  # saves version 1 (the RCT base): the project now exists
    return RedirectResponse(project_url(name), status_code=303)


def _project_page(
    request: Request,
    project: str,
    *,
    flash: str | None = None,
    error: str | None = None,
    uploads: list[UploadRow] | None = None,
    template_text: str | None = None,
    status_code: int = 200,
    launch: _Launch | None = None,
    estimated: bool = False,
) -> Response:
    """The project page. ``estimated``: the launch's estimate is worked out (it counts tokens and
    may read PDFs: only from a thread, and by itself only for a project of up to
    ``AUTO_ESTIMATE_DOCUMENTS`` documents; a larger one is estimated when asked)."""
    ledger, settings = ledger_of(request), settings_of(request)
    template = current_template(ledger, project)
    definition = template.definition
    current = {
        "base": definition.base,
        "custom_fields": [f.to_json() for f in definition.custom_fields],
        "instructions": definition.instructions,
    }
    pinned = settings.model if settings.model and (settings.tokens_per_minute or settings.requests_per_minute) else None
    batches = [
        {"batch": batch, "counts": progress(ledger, batch["id"])}
        for batch in recent_batches(ledger, limit=200)
        if batch["project"] == project
    ]
    listed = project_documents(ledger, project)
    asked = launch is not None
    launch = launch or _Launch([d["id"] for d in listed])
    estimating = estimated and bool(listed) and (asked or len(listed) <= AUTO_ESTIMATE_DOCUMENTS)
    return render(
        "project.html",
        title=f"Project {project}",
        project=project,
        flash=flash,
        error=error,
        status_code=status_code,
        user=user_of(request),
        uploads=uploads or [],
        documents=listed,
        launch=launch,
        estimate=_estimate_view(ledger, settings, project, launch) if estimating else None,
        estimate_waits=bool(listed) and not estimating,
        request_id=uuid.uuid4().hex,
        template=template,
        template_text=template_text or json.dumps(current, indent=2),
        budgets=all_budgets(ledger),
        pinned=pinned,
        batches=batches,
        **_model_context(settings),
    )


@dataclass(frozen=True)
class _Launch:
    """What the launch form holds: the documents ticked and the options (the estimate's input)."""

    documents: list[int]
    second_model: str = ""
    adjudicator: str = ""
    fresh: bool = False
    follow_up: bool = False
    provider_batch: bool = False


@dataclass(frozen=True)
class _ModelRow:
    model: str
    role: str
    documents: int
    already_answered: int
    calls: int
    prompt_tokens: str
    answer_tokens: str
    answer_source: str
    cost: str
    batch_cost: str
    budget: str
    duration: str
    cannot: list[str]


@dataclass(frozen=True)
class _EstimateView:
    """The estimate as the page words it (figures formatted here, the template only lays out)."""

    estimate: BatchEstimate | None
    rows: list[_ModelRow]
    total: str
    total_batch: str
    duration: str
    slots: str
    approximate: int
    unreadable: list[str]
    notes: list[str]
    problem: str = ""
    template: str = ""  # the label of the template version the batch would freeze


def _model_name(value: object) -> str:
    return " ".join(str(value or "").split())[:MAX_MODEL_CHARS]


def _estimate_view(ledger: Ledger, settings: Settings, project: str, launch: _Launch) -> _EstimateView:
    """The launch's estimate, never fatal to the page: a failure is said in the estimate's place."""
    llm = settings.llm(with_key=False)  # no key: the estimate calls nobody
    try:
        estimate = estimate_batch(
            ledger,
            project=project,
            document_ids=launch.documents,
            llm=llm,
            second_model=launch.second_model or None,
            fresh=launch.fresh,
            parse=ParseMode.QUICK,
            parse_options=settings.parse_options(),
            pinned_budget=(settings.tokens_per_minute or None, settings.requests_per_minute or None),
            llm_slots=None,  # the pool's limit lives in Dagster's storage: the page does not open it
            follow_up=launch.follow_up,
        )
    except ExtractionError as exc:
        return _EstimateView(None, [], "", "", "", "", 0, [], [], problem=str(exc)[:300])
    except Exception:  # never a broken project page for an estimate; the details go to the log
        log.exception("estimate for project %s failed", project)
        return _EstimateView(None, [], "", "", "", "", 0, [], [], problem="the estimate could not be computed")
    rows = [
        _ModelRow(
            model=m.model,
            role=ROLES[m.role],
            documents=m.documents,
            already_answered=m.already_answered,
            calls=m.calls,
            prompt_tokens=f"{m.prompt_tokens:,}"
            + (f" ({cached})" if (cached := cache_words(m.cache_read_tokens, m.cache_written_tokens)) else ""),
            answer_tokens=f"{m.answer_tokens:,}",
            answer_source=answer_source(m.answer),
            cost=money(m.cost_usd, price_note(m)),
            batch_cost=money(m.batch_cost_usd, "")
            if m.batch_cost_usd is not None
            else ("ordinary calls" if m.cost_usd is not None else "price unknown"),
            budget=budget_source(m.budget),
            duration=duration(m.minutes_by_budget),
            cannot=[f"{u.filename} (document {u.document_id}): {u.reason}" for u in m.unreadable],
        )
        for m in estimate.models
    ]
    slots = ""
    if estimate.seconds_per_document is not None:
        slots = f"finished documents of {estimate.models[0].model} took {estimate.seconds_per_document:.0f} s each"
    return _EstimateView(
        estimate=estimate,
        rows=rows,
        total=money(estimate.cost_usd, "price unknown"),
        total_batch=money(estimate.batch_cost_usd, "no batch API for every model"),
        duration=duration_words(estimate),
        slots=slots,
        approximate=estimate.approximate,
        unreadable=[f"{u.filename} (document {u.document_id}): {u.reason}" for u in estimate.unreadable],
        notes=notes(estimate),
        template=template_label(estimate.template),
    )


def _launch_from_query(request: Request, project: str, owned: set[int]) -> _Launch | str:
    """The launch form's choices sent back by "Update the estimate"; a message when they are wrong."""
    params = request.query_params
    try:
        chosen = [int(v) for v in params.getlist("document")]
    except ValueError:
        return "invalid document selection"
    if not chosen:
        return "select at least one document to estimate"
    foreign = sorted(set(chosen) - owned)
    if foreign:
        return f"document(s) not in project {project}: {foreign[:10]}"
    second, adjudicator = _model_name(params.get("second_model")), _model_name(params.get("adjudicator"))
    if second and second == (settings_of(request).model or ""):
        return "the second model must be another model than the first"
    if adjudicator and not second:
        return "an adjudicator needs a second model: it settles their disagreements"
    return _Launch(
        chosen,
        second,
        adjudicator,
        params.get("fresh") == "on",
        params.get("follow_up") == "on",
        params.get("provider_batch") == "on",
    )


# A project page estimates its launch by itself up to this many documents; beyond, when asked.
AUTO_ESTIMATE_DOCUMENTS = 50


async def show_project(request: Request, project: str) -> Response:
    launch: _Launch | None = None
    if "estimate" in request.query_params:
        owned = {d["id"] for d in project_documents(ledger_of(request), project)}
        asked = _launch_from_query(request, project, owned)
        if isinstance(asked, str):
            return await run_in_threadpool(_project_page, request, project, error=asked, status_code=400)
        launch = asked
    # The estimate counts tokens and may read PDFs: off the event loop, so other pages stay responsive.
    uploads = _read_upload_rows(request)
    flash, error = read_flash(request)  # left by the upload this page follows
    response = await run_in_threadpool(
        _project_page, request, project, launch=launch, estimated=True, uploads=uploads, flash=flash, error=error
    )
    if UPLOAD_COOKIE in request.cookies:
        response.delete_cookie(UPLOAD_COOKIE, path=project_url(project))
    return clear_flash(request, response)


def _parse_uploaded(ledger: Ledger, settings: Settings, documents: list[tuple[str, str]]) -> None:
    """After an upload's answer is sent: parse its new PDFs as a run would (isolated, cached by
    content), so the next estimate is exact and the batch's runs skip the parse. A PDF that does
    not parse is cached as such and listed by the estimate."""
    try:  # one isolated child for them all (a fresh one after a PDF that fails)
        parse_documents(ledger, documents, settings.parse_options())
    except Exception:
        log.exception("parsing uploaded PDFs in the background failed")


async def upload(request: Request, project: str) -> Response:
    if not same_origin(request):
        return _project_page(request, project, error=CROSS_SITE, status_code=403)
    user = signed_in(request)
    if isinstance(user, Response):
        return user
    ledger, settings = ledger_of(request), settings_of(request)
    limit = settings.max_upload_mb * 1024 * 1024
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:  # refused before a byte of it is read
        return _project_page(request, project, error=f"upload not read: larger than {too_big(limit)}", status_code=413)
    with staging_area(settings.home_dir) as staging:
        try:
            files = await stream_files(
                request,
                field_name="pdfs",
                directory=Path(staging),
                max_bytes=settings.max_pdf_bytes,
                max_files=MAX_UPLOAD_FILES,
                max_request_bytes=limit,
            )
        except (ConfigError, MultipartParseError) as exc:
            status = 413 if isinstance(exc, UploadTooLarge) else 400
            return _project_page(request, project, error=f"upload not read: {exc}", status_code=status)
        if not files:
            return _project_page(request, project, error="choose one or more PDF files to upload", status_code=400)
        # Registration reads each PDF (in a child): off the event loop, so other pages stay responsive.
        verdicts = await run_in_threadpool(
            register_staged,
            ledger,
            settings.documents_dir,
            project,
            [(staged.sent_name, staged.path) for staged in files],
            settings.parse_options(),
        )
    rows = _upload_rows(verdicts)
    # Post, redirect, get: a reload of the page shows the verdicts again, never uploads again.
    response = RedirectResponse(project_url(project), status_code=303)
    set_flash(response, _upload_summary(rows, user.name))
    _set_upload_rows(response, rows, project)
    new = [
        (v.document.sha256, str(settings.documents_dir / f"{v.document.sha256}.pdf")) for v in verdicts if v.document
    ]
    if new:
        response.background = BackgroundTask(_parse_uploaded, ledger, settings, new)
    return response


async def save_template(request: Request, project: str) -> Response:
    user = admin(request)  # who asks, before anything of the form is read
    if isinstance(user, Response):
        return user
    form = await read_form(request)
    text = str(form.get("template") or "")[:MAX_TEMPLATE_CHARS]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return _project_page(
            request, project, error=f"template is not valid JSON: {exc}", template_text=text, status_code=400
        )
    try:
        saved, created = save_version(ledger_of(request), project, definition_from_project_file(data))
    except ConfigError as exc:
        return _project_page(request, project, error=str(exc), template_text=text, status_code=400)
    note = f"template {saved.label} saved by {user.name}; new batches use it, existing batches keep theirs"
    return _project_page(request, project, flash=note if created else f"template unchanged ({saved.label})")


def _budget_words(budget: Budget) -> str:
    def limit(value: int | None, unit: str) -> str:
        return f"{value:,} {unit}/min" if value else f"no {unit} limit"

    return (
        f"{budget.model}: your limits {limit(budget.configured_tokens, 'tokens')}, "
        f"{limit(budget.configured_requests, 'requests')}"
    )


async def save_budget(request: Request, project: str) -> Response:
    user = admin(request)  # who asks, before anything of the form is read
    if isinstance(user, Response):
        return user
    form = await read_form(request)
    settings = settings_of(request)
    model = " ".join(str(form.get("model") or "").split())[:200]
    if not model:
        return _project_page(request, project, error="name the model whose budget this is", status_code=400)
    if settings.model and model == settings.model and (settings.tokens_per_minute or settings.requests_per_minute):
        return _project_page(
            request,
            project,
            error=f"{model}'s budget is set by EXTRACTION_TOKENS_PER_MINUTE / EXTRACTION_REQUESTS_PER_MINUTE "
            "in the server's environment (every run states it again): change it there",
            status_code=400,
        )
    limits: dict[str, int | None] = {}
    for name in ("tokens_per_minute", "requests_per_minute"):
        text = str(form.get(name) or "").strip().replace(",", "").replace("_", "")
        if not text:
            limits[name] = None
            continue
        if not text.isdigit() or not 1 <= int(text) <= 10**10:
            words = name.replace("_", " ")
            return _project_page(
                request,
                project,
                error=f"{words} must be a whole number from 1 to 10,000,000,000, or empty for none: {text[:40]!r}",
                status_code=400,
            )
        limits[name] = int(text)
    budget = configure(ledger_of(request), model, **limits)
    return _project_page(request, project, flash=f"budget saved: {_budget_words(budget)}")


async def start_batch(request: Request, project: str) -> Response:
    from extraction_pipeline.core.llm.batch_api import supports_provider_batches

    user = signed_in(request)  # who asks, before anything of the form is read
    if isinstance(user, Response):
        return user
    form = await read_form(request)
    ledger, settings = ledger_of(request), settings_of(request)
    owned = {d["id"] for d in project_documents(ledger, project)}
    try:
        chosen = [int(v) for v in form.getlist("document") if isinstance(v, str)]
    except ValueError:
        return _project_page(request, project, error="invalid document selection", status_code=400)
    if not chosen:
        return _project_page(request, project, error="select at least one document", status_code=400)
    foreign = sorted(set(chosen) - owned)
    if foreign:
        return _project_page(
            request, project, error=f"document(s) not in project {project}: {foreign[:10]}", status_code=400
        )
    key = str(form.get("request_id") or "")[:100] or uuid.uuid4().hex
    fresh = form.get("fresh") == "on"
    follow_up = form.get("follow_up") == "on"
    provider_batch = form.get("provider_batch") == "on"
    if provider_batch and not supports_provider_batches(settings.model):
        return _project_page(
            request,
            project,
            error=f"{settings.model or 'the offline extractor'} has no provider batch API here "
            "(OpenAI and Anthropic models only)",
            status_code=400,
        )
    second = " ".join(str(form.get("second_model") or "").split())[:200] or None
    adjudicator = " ".join(str(form.get("adjudicator") or "").split())[:200] or None
    if adjudicator and not second:
        return _project_page(
            request,
            project,
            error="an adjudicator needs a second model: it settles their disagreements",
            status_code=400,
        )
    if second is not None and second == (settings.model or ""):
        return _project_page(
            request, project, error="the second model must be another model than the first", status_code=400
        )
    ref = create_batch(
        ledger,
        idempotency_key=f"web:{key}",
        project=project,
        user=user.name,
        document_ids=chosen,
        fresh=fresh,
        second_model=second,
        adjudicator_model=adjudicator,
        follow_up=follow_up,
        provider_batch=provider_batch,
    )
    response = RedirectResponse(f"{PREFIX}/batches/{ref.id}", status_code=303)
    set_flash(response, f"batch {ref.id} started by {user.name} with {len(set(chosen))} document(s)")
    return response


def _for_project(handler: Callable[[Request, str], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """A route under /projects/{project}: the name is checked (letters, digits, . _ -) before
    the handler sees it, so no handler can be reached with a name that could mean a path, and
    the project must exist (only the Projects page's form creates one; visiting an address never
    does)."""

    async def endpoint(request: Request) -> Response:
        ledger = ledger_of(request)
        try:
            project = validate_project(str(request.path_params["project"]))
        except ConfigError as exc:
            return not_found_page(request, str(exc))
        if latest_version(ledger, project) is None and not project_exists(ledger, project):
            return not_found_page(request, f"unknown project {project!r}: create it on the Projects page")
        return await handler(request, project)

    return endpoint


ROUTES = [
    Route(f"{PREFIX}/projects", list_projects, methods=["GET"]),
    Route(f"{PREFIX}/projects", create_project, methods=["POST"]),
    Route(f"{PREFIX}/projects/{{project}}", _for_project(show_project), methods=["GET"]),
    Route(f"{PREFIX}/projects/{{project}}/documents", _for_project(upload), methods=["POST"]),
    Route(f"{PREFIX}/projects/{{project}}/template", _for_project(save_template), methods=["POST"]),
    Route(f"{PREFIX}/projects/{{project}}/batches", _for_project(start_batch), methods=["POST"]),
    Route(f"{PREFIX}/projects/{{project}}/budget", _for_project(save_budget), methods=["POST"]),
]
