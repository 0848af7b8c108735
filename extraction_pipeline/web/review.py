"""The review workbench: a batch's documents with their review progress, and each document's
values beside its PDF page with the quote highlighted; approve, correct, mark not reported,
comment. Decisions go to the append-only ``review_decisions`` table (core/review/decisions.py).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError, ExtractionError
from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import describe_state, get_batch
from extraction_pipeline.core.ledger.budgets import what_calls_wait_for
from extraction_pipeline.core.ledger.items import get_item
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress
from extraction_pipeline.core.review import corrections, decisions
from extraction_pipeline.core.review.progress import DocumentReview, batch_review, review_of
from extraction_pipeline.core.review.source_view import page_image
from extraction_pipeline.core.review.values import (
    APPROVE,
    COMMENT,
    CORRECT,
    MARK_NOT_REPORTED,
    Decision,
    ReviewableValue,
    decision_label,
    final_status,
    in_review_order,
    reviewable_values,
)
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.verification.grounding import VERIFIED
from extraction_pipeline.web.forms import (
    clear_flash,
    read_flash,
    read_form,
    remember_user,
    set_flash,
    text_field,
    user_of,
)
from extraction_pipeline.web.pages import esc, page, status_pill, table, url_part
from extraction_pipeline.web.urls import PREFIX, batch_runs_url

KEYS_HELP = "Keys: j / k next / previous value · a approve · x not reported · c correct · n next document"
SCRIPT = """
const cards=[...document.querySelectorAll('.value')];
let at=Math.max(0,cards.findIndex(c=>c.classList.contains('current')));
function show(i){if(!cards.length)return;at=Math.min(Math.max(i,0),cards.length-1);
cards.forEach(c=>c.classList.remove('current'));const c=cards[at];c.classList.add('current');
c.scrollIntoView({block:'nearest'});const img=document.getElementById('page-image');
if(img&&img.dataset.src!==c.dataset.img){img.dataset.src=c.dataset.img;img.src=c.dataset.img;}
const cap=document.getElementById('page-caption');if(cap)cap.textContent=c.dataset.caption;
history.replaceState(null,'',c.dataset.href);}
cards.forEach((c,i)=>c.addEventListener('click',e=>{if(!e.target.closest('form,a'))show(i)}));
document.addEventListener('keydown',e=>{if(e.target.closest('input,textarea,select'))return;
const c=cards[at];if(e.key==='j')show(at+1);else if(e.key==='k')show(at-1);
else if(e.key==='a'&&c)c.querySelector('form.approve button').click();
else if(e.key==='x'&&c)c.querySelector('form.not-reported button').click();
else if(e.key==='c'&&c){e.preventDefault();c.querySelector('form.correct input[name=value]').focus();}
else if(e.key==='n'){const n=document.getElementById('next-document');if(n)location.href=n.href;}});
"""


def _document_url(batch_id: int, item_id: int, **query: Any) -> str:
    suffix = f"?{urlencode({k: v for k, v in query.items() if v is not None})}" if query else ""
    return f"{PREFIX}/batches/{batch_id}/documents/{item_id}{suffix}"


def _image_url(item_id: int, path: str | None, page_number: int | None = None) -> str:
    query = {k: v for k, v in (("path", path), ("page", page_number)) if v is not None}
    return f"{PREFIX}/items/{item_id}/page.png" + (f"?{urlencode(query)}" if query else "")


def routes(ledger: Ledger, settings: Settings) -> list[Route]:
    cache_dir = settings.home_dir / "cache" / "pages"

    async def batch_page(request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        batch = get_batch(ledger, batch_id)
        if batch is None:
            return page("Batch", "", error=f"unknown batch {batch_id}", status_code=404)
        counts = progress(ledger, batch_id)
        reviews = batch_review(ledger, batch_id)
        flash, error = read_flash(request)  # shown once: the page reloads itself while it waits
        body = _batch_summary(
            batch, counts, reviews, settings, what_calls_wait_for(ledger) if batch["status"] == "open" else []
        )
        rows = [
            [
                esc(r.filename),
                status_pill(r.status) + (f"<div class='muted'>{esc(r.message)}</div>" if r.message else ""),
                esc(r.verified),
                esc(r.approximate),
                esc(r.unverified),
                esc(r.flagged),
                esc(r.judgements),
                esc(f"{r.decided}/{r.values}"),
                f"<span class='{'decided' if r.reviewed else ''}'>{esc(r.label)}</span>",
                f"<a href='{_document_url(batch_id, r.item_id)}'>review</a>" if r.status == "completed" else "",
            ]
            for r in reviews
        ]
        body += table(
            [
                "document",
                "extraction",
                "verified",
                "approximate",
                "unverified",
                "flagged",
                "judgements",
                "decided",
                "review",
                "",
            ],
            rows,
            attrs="id='documents'",
        )
        # Refresh while there is something to wait for: documents still running, or the workbook.
        waiting = batch["status"] != "completed"
        script = "setTimeout(()=>location.reload(),4000);" if waiting else ""
        response = page(f"Batch {batch_id} · {batch['project']}", body, flash=flash, error=error, script=script)
        return clear_flash(request, response)

    async def document_page(request: Request) -> Response:
        batch_id, item_id = request.path_params["batch_id"], request.path_params["item_id"]
        rows = batch_item_rows(ledger, batch_id)
        position = next((i for i, row in enumerate(rows) if row["id"] == item_id), None)
        if position is None:
            return page("Document", "", error=f"batch {batch_id} has no item {item_id}", status_code=404)
        item = rows[position]
        decided = decisions.current_decisions(ledger, batch_id)
        review = review_of(item, decided)
        values = in_review_order(reviewable_values(item["result_json"]))
        chosen = request.query_params.get("value")
        paths = [value.path for value in values]
        current = chosen if chosen in paths else (paths[0] if paths else None)
        comments = decisions.comments_of(ledger, batch_id)
        cards = "".join(
            _value_card(
                batch_id,
                item_id,
                value,
                decided.get((item_id, value.path)),
                comments.get((item_id, value.path), []),
                value.path == current,
            )
            for value in values
        )
        entry = values[paths.index(current)].machine if current else None
        decision = decided.get((item_id, current)) if current else None
        page_param = request.query_params.get("page")
        shown_page = int(page_param) if page_param and page_param.isdigit() else None
        anchor_page = _anchor_page(entry, decision)
        image_page = shown_page or anchor_page or 1
        neighbours = _neighbours(batch_id, rows, position)
        flash, error = read_flash(request)
        body = (
            _reviewer_bar(request, batch_id, item_id)
            + f"<p>{neighbours} · <a href='{PREFIX}/batches/{batch_id}'>batch {batch_id}</a> · "
            f"{esc(review.label)} · <span class='muted'>{esc(KEYS_HELP)}</span></p>"
            + _module_summary(values, decided, item_id)
            + "<div class='grid'><div class='values' id='values'>"
            + (cards or "<p>No values were extracted from this document.</p>")
            + "</div><div class='page'>"
            + _page_panel(batch_id, item_id, current, image_page, int(item["pages"] or 1), anchor_page)
            + "</div></div>"
        )
        response = page(item["filename"], body, flash=flash, error=error, script=SCRIPT)
        return clear_flash(request, response)

    async def image(request: Request) -> Response:
        item_id = request.path_params["item_id"]
        item = get_item(ledger, item_id)
        if item is None:
            return PlainTextResponse(f"unknown item {item_id}\n", status_code=404)
        path = request.query_params.get("path")
        chosen_value = reviewable_values(item["result_json"]).get(path) if path else None
        entry = chosen_value.machine if chosen_value else None
        decision = decisions.current_decisions(ledger, item["batch_id"]).get((item_id, path)) if path else None
        page_param = request.query_params.get("page", "")
        try:
            view = page_image(
                ledger,
                item_id=item_id,
                entry=entry,
                grounding=decision.grounding if decision else None,
                page=int(page_param) if page_param.isdigit() else None,
                documents_dir=settings.documents_dir,
                cache_dir=cache_dir,
                options=settings.parse_options(),
            )
        except ExtractionError as exc:
            return PlainTextResponse(f"{exc}\n", status_code=404 if isinstance(exc, ConfigError) else 422)
        headers = {"x-highlight-rects": json.dumps(view.rects), "cache-control": "private, max-age=300"}
        return Response(view.png, media_type="image/png", headers=headers)

    async def decide(request: Request) -> Response:
        item_id = request.path_params["item_id"]
        form = await read_form(request)
        item = get_item(ledger, item_id)
        if item is None:
            return PlainTextResponse(f"unknown item {item_id}\n", status_code=404)
        path, action = text_field(form, "path", 300), text_field(form, "action", 20)
        back = _document_url(item["batch_id"], item_id, value=path)
        reviewer = user_of(request)
        response = RedirectResponse(back, status_code=303)
        if not reviewer:
            set_flash(response, "enter your reviewer name first (top of the page)", error=True)
            return response
        seen = text_field(form, "seen_seq", 12)
        try:
            outcome = _apply(ledger, settings, item_id, path, action, reviewer, int(seen or "0"), form)
        except (ConfigError, ValueError) as exc:
            set_flash(response, f"{path}: {exc}", error=True)
            return response
        if outcome.kind == decisions.CONFLICT:
            set_flash(response, f"{path}: {outcome.message}", error=True)
            return response
        set_flash(response, f"{path}: {outcome.message}")
        if outcome.kind == decisions.RECORDED and action != COMMENT:
            following = _next_undecided(ledger, item, path)
            response.headers["location"] = _document_url(item["batch_id"], item_id, value=following or path)
        return response

    async def set_reviewer(request: Request) -> Response:
        form = await read_form(request)
        name = " ".join(text_field(form, "reviewer", 200).split())
        target = text_field(form, "back", 500)
        response = RedirectResponse(target if target.startswith(f"{PREFIX}/") else f"{PREFIX}/", status_code=303)
        if name:
            remember_user(response, name)
            set_flash(response, f"reviewing as {name}")
        else:
            set_flash(response, "a reviewer name is required", error=True)
        return response

    return [
        Route(f"{PREFIX}/batches/{{batch_id:id}}", batch_page, methods=["GET"]),
        Route(f"{PREFIX}/batches/{{batch_id:id}}/documents/{{item_id:id}}", document_page, methods=["GET"]),
        Route(f"{PREFIX}/items/{{item_id:id}}/page.png", image, methods=["GET"]),
        Route(f"{PREFIX}/items/{{item_id:id}}/decisions", decide, methods=["POST"]),
        Route(f"{PREFIX}/reviewer", set_reviewer, methods=["POST"]),
    ]


def _apply(
    ledger: Ledger, settings: Settings, item_id: int, path: str, action: str, reviewer: str, seen: int, form: Any
) -> decisions.Outcome:
    comment = text_field(form, "comment", decisions.MAX_COMMENT_CHARS)
    if action == CORRECT:
        return corrections.correct(
            ledger,
            item_id=item_id,
            path=path,
            reviewer=reviewer,
            seen_seq=seen,
            value_text=text_field(form, "value", 2000),
            quote=text_field(form, "quote", 5000),
            comment=comment,
            options=settings.parse_options(),
        )
    return decisions.record(
        ledger, item_id=item_id, path=path, action=action, reviewer=reviewer, seen_seq=seen, comment=comment
    )


def _next_undecided(ledger: Ledger, item: dict[str, Any], after: str) -> str | None:
    decided = decisions.current_decisions(ledger, item["batch_id"])
    paths = [value.path for value in in_review_order(reviewable_values(item["result_json"]))]
    start = paths.index(after) + 1 if after in paths else 0
    for path in paths[start:] + paths[:start]:
        if (item["id"], path) not in decided:
            return path
    return None


def _anchor_page(entry: GroundedValue | None, decision: Decision | None) -> int | None:
    if decision and decision.grounding and decision.grounding.get("page"):
        return int(decision.grounding["page"])
    return entry.page if entry else None


def _batch_summary(
    batch: dict[str, Any], counts: Any, reviews: list[DocumentReview], settings: Settings, waiting: list[str]
) -> str:
    from extraction_pipeline.instance import daemon_running

    reviewed = sum(1 for r in reviews if r.reviewed)
    completed = sum(1 for r in reviews if r.status == "completed")
    links = [
        f"<a href='{batch_runs_url('', batch['uid'])}'>runs in the Dagster UI</a>",
        f"<a href='{PREFIX}/batches/{batch['id']}/meta-analysis.csv'>meta-analysis CSV</a>",
    ]
    if batch["export_path"]:
        links.insert(
            1, f"<a href='{PREFIX}/batches/{batch['id']}/workbook.xlsx' id='workbook-link'>workbook (xlsx)</a>"
        )
    warnings = ""
    if batch["status"] != "completed" and not daemon_running(settings):
        warnings += (
            "<div class='warn'>No daemon is running on this instance: nothing moves until "
            "`extraction-pipeline ui` or `daemon` runs.</div>"
        )
    for text in waiting:
        warnings += f"<div class='warn waiting' role='status'>{esc(text)}</div>"
    if batch.get("export_error"):
        warnings += (
            f"<div class='warn' id='export-failed'>{esc(describe_state(batch))}. Every document's result is "
            "safe in the ledger; the workbook appears here once it can be written.</div>"
        )
    percent = counts.percent
    return (
        warnings + f"<p>Project <a href='{PREFIX}/projects/{url_part(batch['project'])}'>{esc(batch['project'])}</a> · "
        f"started by {esc(batch['user'])} · status <strong id='batch-status'>{esc(batch['status'])}</strong></p>"
        f"<p><progress max='100' value='{percent}'></progress> {counts.done}/{counts.total} documents done "
        f"({counts.completed} completed, {counts.error} errors, {counts.extracting} extracting, "
        f"{counts.pending} pending) · "
        f"reviewed <strong id='reviewed-count'>{reviewed}/{completed}</strong></p>"
        f"<p>{' · '.join(links)}</p>"
        + (
            ""
            if batch["export_path"]
            else "<p class='muted'>The workbook is written when the batch closes; "
            "it is rewritten with review decisions by `batch export` or on the next download.</p>"
        )
    )


def _reviewer_bar(request: Request, batch_id: int, item_id: int) -> str:
    name = user_of(request)
    back = _document_url(batch_id, item_id, value=request.query_params.get("value"))
    return (
        f"<form method='post' action='{PREFIX}/reviewer' class='inline' id='reviewer-form'>"
        f"<label>Reviewer <input type='text' name='reviewer' value='{esc(name)}' required maxlength='200'></label>"
        f"<input type='hidden' name='back' value='{esc(back)}'> <button type='submit'>Set</button></form>"
        + ("" if name else " <span class='flash error'>Set your name before deciding.</span>")
    )


def _module_summary(values: list[ReviewableValue], decided: dict[tuple[int, str], Decision], item_id: int) -> str:
    modules: dict[str, list[int]] = {}
    for value in values:
        counts = modules.setdefault(value.machine.module or value.path.split(".")[0], [0, 0, 0, 0])
        counts[0] += 1
        counts[1] += value.machine.status == VERIFIED
        counts[2] += value.needs_attention
        counts[3] += (item_id, value.path) in decided
    rows = [[esc(name), esc(c[0]), esc(c[1]), esc(c[2]), esc(f"{c[3]}/{c[0]}")] for name, c in modules.items()]
    return table(["module", "values", "verified", "needs attention", "decided"], rows, attrs="id='modules'")


def _value_card(
    batch_id: int,
    item_id: int,
    reviewable: ReviewableValue,
    decision: Decision | None,
    comments: list[dict[str, Any]],
    current: bool,
) -> str:
    path, entry = reviewable.path, reviewable.machine
    module = entry.module or path.split(".")[0]
    name = entry.field
    outcome = f" #{entry.index}" if entry.index is not None else ""
    flags = "".join(f"<div class='pill flag'>check: {esc(flag)}</div>" for flag in entry.flags)
    shown_value = esc(json.dumps(entry.value, ensure_ascii=False) if entry.value is not None else "—")
    final = ""
    if decision is not None:
        final = (
            f" → <strong>{esc(json.dumps(decision.value, ensure_ascii=False))}</strong>"
            if decision.action != APPROVE
            else ""
        )
        final += f" <span class='decided'>{esc(decision_label(decision))}</span>"
        if decision.grounding:
            final += f" (new quote: {status_pill(decision.grounding.get('status'))})"
        elif decision.action == CORRECT:
            final += f" {status_pill(final_status(entry, decision))}"  # not the machine's verdict
    where = f"p.{entry.page}" if entry.page else "no location"
    seen = decision.seq if decision else 0
    hidden = (
        f"<input type='hidden' name='path' value='{esc(path)}'><input type='hidden' name='seen_seq' value='{seen}'>"
    )
    action_url = f"{PREFIX}/items/{item_id}/decisions"

    def button_form(css: str, action: str, label: str) -> str:
        return (
            f"<form method='post' action='{action_url}' class='inline {css}'>{hidden}"
            f"<input type='hidden' name='action' value='{esc(action)}'>"
            f"<button type='submit'>{esc(label)}</button></form>"
        )

    notes = "".join(f"<div class='muted'>💬 {esc(c['reviewer'])}: {esc(c['comment'])}</div>" for c in comments)
    notes += _second_opinion(reviewable, action_url, hidden)
    card_href = _document_url(batch_id, item_id, value=path)
    return (
        f"<div class='value{' current' if current else ''}' data-path='{esc(path)}' data-href='{esc(card_href)}' "
        f"data-img='{esc(_image_url(item_id, path))}' data-caption='{esc(path + ' · ' + where)}'>"
        f"<div><strong>{esc(module)}{esc(outcome)} · {esc(name)}</strong> {status_pill(entry.status)}</div>"
        f"<div>value <code class='machine-value'>{shown_value}</code>{final}</div>"
        f"<div class='muted'>{esc(entry.reason)} · {esc(where)}"
        f" · <a href='{esc(card_href)}'>show on page</a></div>{flags}"
        + (f"<blockquote>{esc(entry.quote)}</blockquote>" if entry.quote else "")
        + notes
        + "<div class='actions'>"
        + button_form("approve", APPROVE, "Approve")
        + button_form("not-reported", MARK_NOT_REPORTED, "Not reported")
        + f"<form method='post' action='{action_url}' class='inline correct'>{hidden}"
        "<input type='hidden' name='action' value='correct'>"
        "<input type='text' name='value' placeholder='corrected value' size='10' aria-label='corrected value'>"
        "<input type='text' name='quote' placeholder='new quote (optional)' size='24' aria-label='new quote'>"
        "<button type='submit'>Correct</button></form>"
        + f"<form method='post' action='{action_url}' class='inline comment'>{hidden}"
        "<input type='hidden' name='action' value='comment'>"
        "<input type='text' name='comment' placeholder='comment' size='14' aria-label='comment'>"
        "<button type='submit'>Comment</button></form>"
        "</div></div>"
    )


def _second_opinion(reviewable: ReviewableValue, action_url: str, hidden: str) -> str:
    """Double extraction: where the two models disagree, the second model's answer side by side,
    and a button that records the reviewer's pick of it (picking the first is Approve)."""
    if not reviewable.disputed:
        return ""
    second = reviewable.second
    model = reviewable.second_model or "second model"
    value = second.value if second else None
    quote = second.quote if second else None
    shown = esc(json.dumps(value, ensure_ascii=False) if value is not None else "—")
    block = (
        f"<div class='second'><span class='pill unverified'>{esc(reviewable.agreement)}</span> "
        f"<strong>{esc(model)}</strong> answered <code class='second-value'>{shown}</code> "
        f"{status_pill(second.status if second else None)}"
        + (f"<blockquote>{esc(quote)}</blockquote>" if quote else "")
    )
    if reviewable.suggestion:
        block += f"<div class='muted suggestion'>adjudicator suggests {esc(reviewable.suggestion)}</div>"
    if value is not None:
        block += (
            f"<form method='post' action='{action_url}' class='inline pick-second'>{hidden}"
            "<input type='hidden' name='action' value='correct'>"
            f"<input type='hidden' name='value' value='{esc(value)}'>"
            f"<input type='hidden' name='quote' value='{esc(quote or '')}'>"
            f"<input type='hidden' name='comment' value='{esc(f'picked the answer of {model}')}'>"
            f"<button type='submit'>Pick {esc(model)}'s answer</button></form>"
        )
    return block + "</div>"


def _page_panel(batch_id: int, item_id: int, path: str | None, shown: int, pages: int, anchor: int | None) -> str:
    nav = []
    if shown > 1:
        nav.append(
            f"<a href='{esc(_document_url(batch_id, item_id, value=path, page=shown - 1))}'>← page {shown - 1}</a>"
        )
    if shown < pages:
        nav.append(
            f"<a href='{esc(_document_url(batch_id, item_id, value=path, page=shown + 1))}'>page {shown + 1} →</a>"
        )
    caption = f"{path or ''} · page {shown} of {pages}" + ("" if anchor else " · the quote was not found on any page")
    src = _image_url(item_id, path, shown if shown != anchor else None)
    return (
        f"<div class='muted' id='page-caption'>{esc(caption)}</div><div>{' · '.join(nav)}</div>"
        f"<img id='page-image' src='{esc(src)}' data-src='{esc(src)}' alt='page {shown} of the PDF, quote highlighted'>"
    )


def _neighbours(batch_id: int, rows: list[dict[str, Any]], position: int) -> str:
    links = []
    completed = [i for i, row in enumerate(rows) if row["status"] == "completed"]
    before = [i for i in completed if i < position]
    after = [i for i in completed if i > position]
    if before:
        links.append(f"<a href='{_document_url(batch_id, rows[before[-1]]['id'])}'>← previous document</a>")
    if after:
        links.append(
            f"<a id='next-document' href='{_document_url(batch_id, rows[after[0]]['id'])}'>next document →</a>"
        )
    return " · ".join(links) or "only document"
