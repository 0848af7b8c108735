"""The review workbench: a batch's documents with their review progress, and each document as an
extraction form — study fields, the arms as columns, Risk of Bias as a row of domains, outcomes as
rows with a column group per arm and their comparisons under them (core/review/form.py) — beside
its PDF page with the selected value's quote highlighted. Decisions per value and per outcome go
to the append-only ``review_decisions`` table (core/review/decisions.py), under the signed-in
reviewer; reassigning an outcome entry to another arm is a correction of its arm reference,
offered as a choice of the study's declared arms and checked again on the server.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError, ExtractionError
from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batch_jobs import describe_provider_batches
from extraction_pipeline.core.ledger.batches import describe_state, get_batch
from extraction_pipeline.core.ledger.budgets import what_calls_wait_for
from extraction_pipeline.core.ledger.items import get_item
from extraction_pipeline.core.ledger.queries import batch_item_rows, progress
from extraction_pipeline.core.ledger.rows import ItemRow
from extraction_pipeline.core.ledger.templates import definition_of, label_of, template_of_batch
from extraction_pipeline.core.review import corrections, decisions
from extraction_pipeline.core.review.form import build_form, field_title
from extraction_pipeline.core.review.missed import current_missed_reviews
from extraction_pipeline.core.review.page_image import DRAWING
from extraction_pipeline.core.review.progress import batch_review, review_of
from extraction_pipeline.core.review.source_view import anchor_of, page_image
from extraction_pipeline.core.review.values import (
    APPROVE,
    COMMENT,
    CORRECT,
    Decision,
    empty_paths,
    in_review_order,
    reviewable_values,
)
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.verification.grounding import skeleton
from extraction_pipeline.web.deps import ledger_of, settings_of, signed_in, user_of
from extraction_pipeline.web.forms import clear_flash, read_flash, read_form, set_flash, text_field
from extraction_pipeline.web.missed import missed_anchor, missed_image_url, missed_list
from extraction_pipeline.web.pages import message_page
from extraction_pipeline.web.synthesis import synthesis_view
from extraction_pipeline.web.templating import render
from extraction_pipeline.web.urls import PREFIX, batch_runs_url

APPROVE_ROW = "approve-row"  # every undecided value of one outcome, each its own decision


def _document_url(batch_id: int, item_id: int, **query: Any) -> str:
    kept = {k: v for k, v in query.items() if v is not None}
    return f"{PREFIX}/batches/{batch_id}/documents/{item_id}" + (f"?{urlencode(kept)}" if kept else "")


def _image_url(item_id: int, path: str | None, page_number: int | None = None, version: str | None = None) -> str:
    """A page image's address; ``version`` names what it highlights (``highlight_version``), so
    a new highlight is a new address and an address can be cached for good."""
    query = {k: v for k, v in (("path", path), ("page", page_number), ("v", version)) if v is not None}
    return f"{PREFIX}/items/{item_id}/page.png" + (f"?{urlencode(query)}" if query else "")


# What the page needs of each highlighted part: its letters and digits, to find the part that
# prints the value (review.js compares the same skeleton). A response header has to stay small (a
# proxy's buffer is 4-8 KB) and ASCII: parts cut, and the last ones dropped past the budget.
HEADER_PART_CHARS = 120
HEADER_BYTES = 2048


def texts_header(texts: list[str]) -> str:
    """Each highlighted part's skeleton as a JSON list within ``HEADER_BYTES`` (JSON escapes
    non-ASCII letters; no control character survives the skeleton)."""
    parts = [skeleton(text)[:HEADER_PART_CHARS] for text in texts]
    while parts and len(json.dumps(parts)) > HEADER_BYTES:
        parts.pop()  # the parts left keep their places: rects[i] is still texts[i]
    return json.dumps(parts)


def highlight_version(entry: GroundedValue | None, grounding: dict[str, Any] | None) -> str:
    """What a value's page image shows, as a short digest: the reviewer's grounded quote where a
    decision has one, else the model's quote's place, and how a quote is drawn. A correction with
    a new quote changes it."""
    shown = anchor_of(entry, grounding)  # exactly what the image highlights, an interrupted quote's second part too
    return hashlib.sha256(json.dumps([shown, DRAWING], sort_keys=True, default=str).encode()).hexdigest()[:12]


IMMUTABLE = "private, max-age=31536000, immutable"  # an address names its content: never stale


async def batch_page(request: Request) -> Response:
    ledger, settings = ledger_of(request), settings_of(request)
    batch_id = request.path_params["batch_id"]
    batch = get_batch(ledger, batch_id)
    if batch is None:
        return message_page("Batch", error=f"unknown batch {batch_id}", status_code=404, user=user_of(request))
    from extraction_pipeline.instance import daemon_running

    reviews = batch_review(ledger, batch_id)
    # Drawing the pictures takes a tenth of a second each (matplotlib): not on the event loop.
    synthesis = await run_in_threadpool(synthesis_view, ledger, batch_id)
    flash, error = read_flash(request)  # shown once: the page reloads itself while it waits
    response = render(
        "batch.html",
        title=f"Batch {batch_id} · {batch['project']}",
        batch=batch,
        counts=progress(ledger, batch_id),
        reviews=reviews,
        reviewed=sum(1 for r in reviews if r.reviewed),
        reviewable=sum(1 for r in reviews if r.status == "completed"),
        waits=[
            *describe_provider_batches(ledger, batch),
            *(what_calls_wait_for(ledger) if batch["status"] == "open" else []),
        ],
        no_daemon=batch["status"] != "completed" and not daemon_running(settings),
        state=describe_state(batch),
        models=_models_of(ledger, batch_id),
        template=label_of(template_of_batch(ledger, batch_id)),
        runs_url=batch_runs_url("", batch["uid"]),
        waiting=batch["status"] != "completed",  # the page reloads while documents or the workbook are due
        synthesis=synthesis,
        flash=flash,
        error=error,
        user=user_of(request),
    )
    return clear_flash(request, response)


def _models_of(ledger: Ledger, batch_id: int) -> list[str]:
    """The models that extracted the batch's documents so far, the second model's too (double
    extraction), each once, in the order first seen."""
    found: dict[str, None] = {}
    for item in batch_item_rows(ledger, batch_id):
        if item["model"]:
            found[str(item["model"])] = None
        second = (json.loads(item["result_json"]).get("second") or {}) if item["result_json"] else {}
        if second.get("model"):
            found[f"{second['model']} (second model)"] = None
    return list(found)


@dataclass(frozen=True)
class CellView:
    """Where a value's cell points: its page image, its address, its decision form's state."""

    title: str
    href: str
    image: str
    caption: str
    action: str
    seen: int
    comments: list[dict[str, Any]]


async def document_page(request: Request) -> Response:
    ledger = ledger_of(request)
    batch_id, item_id = request.path_params["batch_id"], request.path_params["item_id"]
    rows = batch_item_rows(ledger, batch_id)
    position = next((i for i, row in enumerate(rows) if row["id"] == item_id), None)
    user = user_of(request)
    if position is None:
        return message_page("Document", error=f"batch {batch_id} has no item {item_id}", status_code=404, user=user)
    item = rows[position]
    decided_all = decisions.current_decisions(ledger, batch_id)
    decided = {path: d for (item_key, path), d in decided_all.items() if item_key == item_id}
    values = reviewable_values(item["result_json"])
    empty = empty_paths(item["result_json"])
    form = build_form(definition_of(template_of_batch(ledger, batch_id)), values, decided, empty)
    cells = [*form.cells(), *form.empty_cells()]
    first_attention = next((v.path for v in in_review_order(values)), None)
    missed = missed_list(ledger, batch_id, item, current_missed_reviews(ledger, [item_id]))
    chosen = request.query_params.get("value")
    missed_paths = {view.path: view for view in missed.views}
    shown_paths = {cell.path for cell in cells}
    current = chosen if chosen in shown_paths or chosen in missed_paths else first_attention
    comments = decisions.comments_of(ledger, batch_id)
    views = {}
    for cell in cells:
        machine = cell.reviewable.machine if cell.reviewable else None
        where = f"p.{machine.page}" if machine and machine.page else "no location"
        title = field_title(cell.path)
        views[cell.path] = CellView(
            title=title,
            href=_document_url(batch_id, item_id, value=cell.path),
            image=_image_url(
                item_id,
                cell.path,
                version=highlight_version(machine, cell.decision.grounding if cell.decision else None),
            ),
            caption=f"{title} · {where}",
            action=f"{PREFIX}/items/{item_id}/decisions",
            seen=cell.decision.seq if cell.decision else 0,
            comments=comments.get((item_id, cell.path), []),
        )
    entry_now = values[current].machine if current in values else None
    missed_now = missed_paths.get(current or "")
    page_param = request.query_params.get("page")
    pages = int(item["pages"] or 1)
    shown_page = int(page_param) if page_param and page_param.isdigit() and 0 < int(page_param) <= pages else None
    anchor = missed_now.item.page if missed_now else _anchor_page(entry_now, decided.get(current) if current else None)
    shown = shown_page or anchor or 1
    completed = [i for i, row in enumerate(rows) if row["status"] == "completed"]
    before = [i for i in completed if i < position]
    after = [i for i in completed if i > position]
    flash, error = read_flash(request)
    caption = f"{field_title(current) if current else ''} · page {shown} of {pages}" + (
        "" if anchor else " · the quote was not found on any page"
    )
    response = render(
        "document.html",
        title=item["filename"],
        batch_id=batch_id,
        item_id=item_id,
        here=_document_url(batch_id, item_id, value=current),
        review=review_of(item, decided_all),
        form=form,
        views=views,
        current=current,
        previous=_document_url(batch_id, rows[before[-1]]["id"]) if before else None,
        next=_document_url(batch_id, rows[after[0]]["id"]) if after else None,
        image=missed_image_url(item_id, missed_now.item.key, shown if shown != anchor else None)
        if missed_now
        else _image_url(
            item_id,
            current,
            shown if shown != anchor else None,
            highlight_version(entry_now, (decided[current].grounding if current in decided else None)),
        ),
        missed=missed,
        caption=caption,
        shown_page=shown,
        page_before=_document_url(batch_id, item_id, value=current, page=shown - 1) if shown > 1 else None,
        page_after=_document_url(batch_id, item_id, value=current, page=shown + 1) if shown < pages else None,
        flash=flash,
        error=error,
        user=user,
    )
    return clear_flash(request, response)


async def image(request: Request) -> Response:
    ledger, settings = ledger_of(request), settings_of(request)
    item_id = request.path_params["item_id"]
    item = get_item(ledger, item_id)
    if item is None:
        return PlainTextResponse(f"unknown item {item_id}\n", status_code=404)
    path = request.query_params.get("path")
    chosen_value = reviewable_values(item["result_json"]).get(path) if path else None
    entry = chosen_value.machine if chosen_value else None
    decision = decisions.current_decisions(ledger, item["batch_id"]).get((item_id, path)) if path else None
    missed_key = request.query_params.get("missed")
    grounding = decision.grounding if decision else None
    if missed_key:  # an item of the possibly-missed list, highlighted like a quote
        grounding = missed_anchor(item, missed_key)
        if grounding is None:
            return PlainTextResponse(f"item {item_id} lists no possibly missed {missed_key!r}\n", status_code=404)
    page_param = request.query_params.get("page", "")
    try:
        scale = float(request.query_params.get("scale") or 1)
    except ValueError:
        scale = 1.0
    try:
        view = page_image(
            ledger,
            item_id=item_id,
            entry=entry,
            grounding=grounding,
            page=int(page_param) if page_param.isdigit() else None,
            documents_dir=settings.documents_dir,
            cache_dir=settings.home_dir / "cache" / "pages",
            options=settings.parse_options(),
            scale=scale if scale == scale else 1.0,  # NaN: the default size
        )
    except ExtractionError as exc:
        return PlainTextResponse(f"{exc}\n", status_code=404 if isinstance(exc, ConfigError) else 422)
    # Cached for good only under the address of what it shows now; an old address is never cached.
    # A possibly-missed item's place is named by its key; the address adds how it is drawn.
    current = str(DRAWING) if missed_key else highlight_version(entry, grounding)
    fresh = request.query_params.get("v") == current
    headers = {
        "x-highlight-rects": json.dumps(view.rects),
        "x-highlight-texts": texts_header(view.texts),
        "cache-control": IMMUTABLE if fresh else "no-store",
    }
    return Response(view.png, media_type="image/png", headers=headers)


async def decide(request: Request) -> Response:
    ledger, settings = ledger_of(request), settings_of(request)
    item_id = request.path_params["item_id"]
    item = get_item(ledger, item_id)
    if item is None:
        return PlainTextResponse(f"unknown item {item_id}\n", status_code=404)
    reviewer = signed_in(request)  # who asks, before anything of the form is read
    if isinstance(reviewer, Response):
        if request.headers.get("sec-fetch-mode") == "navigate" or "text/html" in request.headers.get("accept", ""):
            back = RedirectResponse(_document_url(item["batch_id"], item_id), status_code=303)
            set_flash(back, "sign in to record decisions", error=True)
            return back
        return reviewer
    form = await read_form(request)
    action = text_field(form, "action", 20)
    paths = [p[:300] for p in form.getlist("path") if isinstance(p, str)][:200]
    path = paths[0] if paths else ""
    response = RedirectResponse(_document_url(item["batch_id"], item_id, value=path or None), status_code=303)
    if action == APPROVE_ROW:
        return _approve_row(ledger, item, paths, reviewer.name, response)
    seen = text_field(form, "seen_seq", 12)
    try:
        outcome = _apply(ledger, settings, item_id, path, action, reviewer.name, int(seen or "0"), form)
    except (ConfigError, ValueError) as exc:
        set_flash(response, f"{field_title(path)}: {exc}", error=True)
        return response
    if outcome.kind == decisions.CONFLICT:
        set_flash(response, f"{field_title(path)}: {outcome.message}", error=True)
        return response
    set_flash(response, f"{field_title(path)}: {outcome.message}")
    if outcome.kind == decisions.RECORDED and action != COMMENT:
        following = _next_undecided(ledger, item, path)
        response.headers["location"] = _document_url(item["batch_id"], item_id, value=following or path)
    return response


def _approve_row(ledger: Ledger, item: ItemRow, paths: list[str], reviewer: str, response: Response) -> Response:
    """ "Approve the outcome": one approve decision per value the reviewer saw undecided; a value
    someone else decided meanwhile is a conflict, reported, never overwritten."""
    known = reviewable_values(item["result_json"])
    recorded, conflicts = 0, []
    for path in paths:
        if path not in known:
            continue
        outcome = decisions.record(ledger, item_id=item["id"], path=path, action=APPROVE, reviewer=reviewer, seen_seq=0)
        if outcome.kind == decisions.RECORDED:
            recorded += 1
        elif outcome.kind == decisions.CONFLICT:
            conflicts.append(f"{field_title(path)}: {outcome.message}")
    if conflicts:
        set_flash(response, f"{recorded} approved; " + "; ".join(conflicts)[:400], error=True)
    else:
        set_flash(response, f"outcome approved: {recorded} value(s) approved by {reviewer}")
    following = _next_undecided(ledger, item, paths[-1] if paths else "")
    response.headers["location"] = _document_url(item["batch_id"], item["id"], value=following)
    return response


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


def _next_undecided(ledger: Ledger, item: ItemRow, after: str) -> str | None:
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


ROUTES = [
    Route(f"{PREFIX}/batches/{{batch_id:id}}", batch_page, methods=["GET"]),
    Route(f"{PREFIX}/batches/{{batch_id:id}}/documents/{{item_id:id}}", document_page, methods=["GET"]),
    Route(f"{PREFIX}/items/{{item_id:id}}/page.png", image, methods=["GET"]),
    Route(f"{PREFIX}/items/{{item_id:id}}/decisions", decide, methods=["POST"]),
]
