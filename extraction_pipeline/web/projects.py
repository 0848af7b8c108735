"""Projects: create one, upload PDFs, edit its template, start a batch — no shell needed.

Every action goes through the same core functions as the command line (``register_pdf``,
``save_version``, ``create_batch``), so a batch started here is dispatched, monitored in the
Dagster UI and exported exactly like one created with ``batch create``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from python_multipart.exceptions import MultipartParseError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError
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
from extraction_pipeline.core.pdf.registration import validate_project
from extraction_pipeline.core.pdf.uploads import UploadVerdict, register_staged, staging_area
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.forms import CROSS_SITE, read_form, remember_user, same_origin, set_flash, user_of
from extraction_pipeline.web.pages import esc, page, table, url_part
from extraction_pipeline.web.upload_stream import stream_files
from extraction_pipeline.web.urls import PREFIX

MAX_UPLOAD_FILES = 500
MAX_TEMPLATE_CHARS = 100_000


def _project_url(project: str) -> str:
    return f"{PREFIX}/projects/{url_part(project)}"


def routes(ledger: Ledger, settings: Settings) -> list[Route]:
    def model_warning() -> str:
        if settings.model:
            return f"<p class='muted'>Model: <code>{esc(settings.model)}</code></p>"
        # The warning begins "no model configured: ...": said once, not twice.
        return f"<div class='warn' role='note'>{esc(OFFLINE_WARNING[0].upper() + OFFLINE_WARNING[1:])}.</div>"

    async def list_projects(request: Request) -> Response:
        return _projects_page()

    def _projects_page(error: str | None = None, status_code: int = 200) -> Response:
        rows = [
            [
                f"<a href='{_project_url(p['project'])}'>{esc(p['project'])}</a>",
                esc(p["documents"]),
                esc(f"v{p['template_version']}" if p["template_version"] else "base"),
            ]
            for p in projects_overview(ledger)
        ]
        body = (
            model_warning()
            + table(["project", "documents", "template"], rows)
            + f"<h2>New project</h2><form method='post' action='{PREFIX}/projects'>"
            "<label>Name <input type='text' name='project' required maxlength='100' "
            "pattern='[A-Za-z0-9][A-Za-z0-9_.\\-]*' placeholder='e.g. statins-2026'></label> "
            "<button type='submit'>Create project</button></form>"
            "<p class='muted'>Letters, digits, '.', '_' or '-'. "
            "A new project starts with the built-in RCT template.</p>"
        )
        return page("Projects", body, error=error, status_code=status_code)

    async def create_project(request: Request) -> Response:
        form = await read_form(request)
        name = str(form.get("project") or "").strip()
        try:
            validate_project(name)
        except ConfigError as exc:
            return _projects_page(str(exc), 400)
        current_template(ledger, name)  # saves version 1 (the RCT base): the project now exists
        return RedirectResponse(_project_url(name), status_code=303)

    def _project_page(
        request: Request,
        project: str,
        *,
        flash: str | None = None,
        error: str | None = None,
        uploads: list[UploadVerdict] | None = None,
        template_text: str | None = None,
        status_code: int = 200,
    ) -> Response:
        documents = project_documents(ledger, project)
        template = current_template(ledger, project)
        body = model_warning()
        if uploads:
            body += _upload_results(uploads)
        body += (
            f"<h2>Upload PDFs</h2><form method='post' enctype='multipart/form-data' "
            f"action='{_project_url(project)}/documents'>"
            "<input type='file' name='pdfs' accept='application/pdf,.pdf' multiple required> "
            "<button type='submit'>Upload</button></form>"
            "<p class='muted'>Each file is checked on its own (readable PDF with a text layer, within the size "
            "limit); good files are registered even when others are refused. The same PDF twice is stored once.</p>"
        )
        body += _documents_and_launch(project, documents, user_of(request))
        body += _template_section(project, template, template_text)
        body += _budget_section(project, settings, all_budgets(ledger))
        body += _project_batches(project)
        return page(f"Project {project}", body, flash=flash, error=error, status_code=status_code)

    def _project_batches(project: str) -> str:
        rows = []
        for batch in recent_batches(ledger, limit=200):
            if batch["project"] != project:
                continue
            counts = progress(ledger, batch["id"])
            rows.append(
                [
                    f"<a href='{PREFIX}/batches/{batch['id']}'>batch {batch['id']}</a>",
                    esc(batch["user"]),
                    esc(batch["status"]),
                    esc(f"{counts.done}/{counts.total}"),
                ]
            )
        return "<h2>Batches</h2>" + (table(["batch", "user", "status", "done"], rows) if rows else "<p>None yet.</p>")

    async def show_project(request: Request, project: str) -> Response:
        return _project_page(request, project)

    async def upload(request: Request, project: str) -> Response:
        if not same_origin(request):
            return _project_page(request, project, error=CROSS_SITE, status_code=403)
        with staging_area(settings.home_dir) as staging:
            try:
                files = await stream_files(
                    request,
                    field_name="pdfs",
                    directory=Path(staging),
                    max_bytes=settings.max_pdf_bytes,
                    max_files=MAX_UPLOAD_FILES,
                )
            except (ConfigError, MultipartParseError) as exc:
                return _project_page(request, project, error=f"upload not read: {exc}", status_code=400)
            if not files:
                return _project_page(request, project, error="choose one or more PDF files to upload", status_code=400)
            # Registration parses each PDF: off the event loop, so other pages stay responsive.
            verdicts = [
                await run_in_threadpool(
                    register_staged,
                    ledger,
                    settings.documents_dir,
                    project,
                    staged.sent_name,
                    staged.path,
                    settings.max_pdf_bytes,
                )
                for staged in files
            ]
        good = sum(1 for v in verdicts if v.document)
        summary = f"{good} of {len(verdicts)} file(s) registered"
        return _project_page(request, project, flash=summary, uploads=verdicts)

    async def save_template(request: Request, project: str) -> Response:
        form = await read_form(request)
        text = str(form.get("template") or "")[:MAX_TEMPLATE_CHARS]
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return _project_page(
                request, project, error=f"template is not valid JSON: {exc}", template_text=text, status_code=400
            )
        try:
            saved, created = save_version(ledger, project, definition_from_project_file(data))
        except ConfigError as exc:
            return _project_page(request, project, error=str(exc), template_text=text, status_code=400)
        note = f"template {saved.label} saved; new batches use it, existing batches keep theirs"
        return _project_page(request, project, flash=note if created else f"template unchanged ({saved.label})")

    async def save_budget(request: Request, project: str) -> Response:
        form = await read_form(request)
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
        budget = configure(ledger, model, **limits)
        return _project_page(request, project, flash=f"budget saved: {_budget_words(budget)}")

    async def start_batch(request: Request, project: str) -> Response:
        form = await read_form(request)
        user = " ".join(str(form.get("user") or "").split())
        if not user:
            return _project_page(
                request, project, error="enter your name: a batch is started by a named user", status_code=400
            )
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
            user=user,
            document_ids=chosen,
            fresh=fresh,
            second_model=second,
            adjudicator_model=adjudicator,
        )
        response = RedirectResponse(f"{PREFIX}/batches/{ref.id}", status_code=303)
        set_flash(response, f"batch {ref.id} started with {len(set(chosen))} document(s)")
        remember_user(response, user)
        return response

    return [
        Route(f"{PREFIX}/projects", list_projects, methods=["GET"]),
        Route(f"{PREFIX}/projects", create_project, methods=["POST"]),
        Route(f"{PREFIX}/projects/{{project}}", _for_project(ledger, show_project), methods=["GET"]),
        Route(f"{PREFIX}/projects/{{project}}/documents", _for_project(ledger, upload), methods=["POST"]),
        Route(f"{PREFIX}/projects/{{project}}/template", _for_project(ledger, save_template), methods=["POST"]),
        Route(f"{PREFIX}/projects/{{project}}/batches", _for_project(ledger, start_batch), methods=["POST"]),
        Route(f"{PREFIX}/projects/{{project}}/budget", _for_project(ledger, save_budget), methods=["POST"]),
    ]


def _for_project(
    ledger: Ledger, handler: Callable[[Request, str], Awaitable[Response]]
) -> Callable[[Request], Awaitable[Response]]:
    """A route under /projects/{project}: the name is checked (letters, digits, . _ -) before
    the handler sees it, so no handler can be reached with a name that could mean a path, and
    the project must exist (only the Projects page's form creates one; visiting an address never
    does)."""

    async def endpoint(request: Request) -> Response:
        try:
            project = validate_project(str(request.path_params["project"]))
        except ConfigError as exc:
            return page("Project", "", error=str(exc), status_code=404)
        if latest_version(ledger, project) is None and not project_exists(ledger, project):
            return page(
                "Project", "", error=f"unknown project {project!r}: create it on the Projects page", status_code=404
            )
        return await handler(request, project)

    return endpoint


def _upload_results(verdicts: list[UploadVerdict]) -> str:
    rows = []
    for verdict in verdicts:
        doc = verdict.document
        if doc is None:
            rows.append([esc(verdict.filename), "<strong>refused</strong>", esc(verdict.reason)])
            continue
        if doc.created:
            outcome = f"registered as document {doc.id} ({doc.pages} pages)"
        elif doc.registered_name != doc.filename:
            outcome = f"already registered as {doc.registered_name} (document {doc.id})"
        else:
            outcome = f"already registered (document {doc.id})"
        rows.append([esc(verdict.filename), "registered", esc(outcome)])
    return "<h2>Upload results</h2>" + table(["file", "result", "detail"], rows, attrs="id='upload-results'")


def _documents_and_launch(project: str, documents: list[dict[str, Any]], user: str) -> str:
    if not documents:
        return "<h2>Documents</h2><p>No documents yet: upload PDFs above.</p>"
    rows = [
        [
            f"<input type='checkbox' name='document' value='{d['id']}' checked "
            f"aria-label='select {esc(d['filename'])}'>",
            esc(d["id"]),
            esc(d["filename"]),
            esc(d["pages"]),
            esc(d["sha256"][:12]),
        ]
        for d in documents
    ]
    return (
        f"<h2>Documents</h2><form method='post' action='{_project_url(project)}/batches' id='launch'>"
        + table(["", "id", "file", "pages", "sha256"], rows)
        + f"<input type='hidden' name='request_id' value='{uuid.uuid4().hex}'>"
        f"<label>Your name <input type='text' name='user' required maxlength='200' value='{esc(user)}'></label> "
        "<label>Second model (double extraction, optional) <input type='text' name='second_model' "
        "maxlength='200' placeholder='e.g. anthropic/claude-sonnet-4'></label> "
        "<label>Adjudicator (optional third model) <input type='text' name='adjudicator' maxlength='200'></label><br>"
        "<label><input type='checkbox' name='fresh'> ask the model again (do not reuse answers already paid for)"
        "</label> <button type='submit'>Start batch with the selected documents</button></form>"
        "<p class='muted'>The batch freezes the current template version; its runs appear in the Dagster UI "
        "(Runs, tagged extraction/batch).</p>"
    )


def _template_section(project: str, template: Any, text: str | None) -> str:
    definition = template.definition
    current = {
        "base": definition.base,
        "custom_fields": [f.to_json() for f in definition.custom_fields],
        "instructions": definition.instructions,
    }
    fields = "".join(
        f"<li><code>{esc(f.name)}</code> ({esc(f.type.value)}): {esc(f.instruction)}</li>"
        for f in definition.custom_fields
    )
    return (
        f"<h2>Template {esc(template.label)}</h2>"
        + (f"<p>Project fields:</p><ul>{fields}</ul>" if fields else "<p>No project fields: the RCT base only.</p>")
        + f"<form method='post' action='{_project_url(project)}/template'>"
        "<textarea name='template' rows='10' cols='100' spellcheck='false'>"
        f"{esc(text or json.dumps(current, indent=2))}"
        "</textarea><br><button type='submit'>Save as a new template version</button></form>"
        '<p class=\'muted\'>Fields: {"name", "type" (text, integer, number, choice), "instruction", "choices"}. '
        "Saving creates a new version; batches already started keep the version they froze.</p>"
    )


def _budget_words(budget: Budget) -> str:
    def limit(value: int | None, unit: str) -> str:
        return f"{value:,} {unit}/min" if value else f"no {unit} limit"

    return (
        f"{budget.model}: your limits {limit(budget.configured_tokens, 'tokens')}, "
        f"{limit(budget.configured_requests, 'requests')}"
    )


def _budget_section(project: str, settings: Settings, budgets: list[Budget]) -> str:
    """Each model's budget for the whole instance (every project, run and worker spends the same
    one): the user's limits, what the provider's headers said, and a form to set the user's."""

    def cell(value: int | None) -> str:
        return esc(f"{value:,}") if value else "—"

    pinned = settings.model if settings.model and (settings.tokens_per_minute or settings.requests_per_minute) else None
    rows = [
        [
            f"<code>{esc(b.model)}</code>"
            + (" <span class='muted'>(set by the environment)</span>" if b.model == pinned else ""),
            cell(b.configured_tokens),
            cell(b.configured_requests),
            cell(b.learned_tokens),
            cell(b.learned_requests),
            cell(b.tokens_per_minute),
            cell(b.requests_per_minute),
        ]
        for b in budgets
    ]
    known = (
        table(
            [
                "model",
                "your tokens/min",
                "your requests/min",
                "provider's tokens/min",
                "provider's requests/min",
                "applies: tokens/min",
                "requests/min",
            ],
            rows,
            attrs="id='budgets'",
        )
        if rows
        else "<p>No budget known yet: set one below, or the first answers' rate-limit headers will tell it.</p>"
    )
    return (
        "<h2>Model budgets</h2>"
        "<p class='muted'>One budget per model for the whole instance: every run and worker waits until its "
        "call fits instead of being refused. The provider's limits are learned from its rate-limit headers; "
        "the lower of yours and the provider's applies.</p>"
        + known
        + f"<form method='post' action='{_project_url(project)}/budget' id='budget-form'>"
        f"<label>Model <input type='text' name='model' required maxlength='200' value='{esc(settings.model or '')}' "
        "placeholder='e.g. openai/gpt-4o-mini'></label> "
        "<label>Tokens per minute <input type='text' name='tokens_per_minute' inputmode='numeric' maxlength='14' "
        "placeholder='e.g. 200000'></label> "
        "<label>Requests per minute <input type='text' name='requests_per_minute' inputmode='numeric' "
        "maxlength='14' placeholder='e.g. 500'></label> "
        "<button type='submit'>Save budget</button></form>"
        "<p class='muted'>Leave a limit empty for none of yours (the provider's still applies).</p>"
    )
