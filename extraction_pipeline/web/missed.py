"""A document's "possibly missed" list on its review page: each item a cell like a value (a click
shows it highlighted on its page), with what a reviewer may do about it: dismiss it, reopen it, or
turn it into a value (correct one of the document's empty fields with the number it shows, its text
as the quote). The list itself is the recall check's, stored with the result
(core/verification/recall.py); decisions on it are core/review/missed.py's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.extraction.grounded import NUMERIC, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.items import get_item
from extraction_pipeline.core.ledger.rows import ItemListing, ItemRow
from extraction_pipeline.core.ledger.templates import definition_of, template_of_batch
from extraction_pipeline.core.review import corrections, decisions
from extraction_pipeline.core.review.form import field_title
from extraction_pipeline.core.review.missed import MissedAction, MissedReview, missed_of, record_missed_review
from extraction_pipeline.core.review.page_image import DRAWING
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.verification.recall import PossiblyMissed
from extraction_pipeline.web.deps import ledger_of, settings_of, signed_in
from extraction_pipeline.web.forms import read_form, set_flash, text_field
from extraction_pipeline.web.urls import PREFIX

MISSED_PREFIX = "missed:"  # a missed item's cell is addressed as "missed:<key>" on the page
# The fields that say which outcome and arm an entry is (version 2 outcome entries name their arm;
# an arm entry its name), in the template's order.
NAMING_FIELDS = ("outcome_name", "arm", "arm_name")


@dataclass(frozen=True)
class MissedView:
    item: PossiblyMissed
    review: MissedReview | None
    path: str  # the cell's address on the page
    href: str
    image: str
    caption: str
    proposed: str = ""  # the empty field whose entry the item names, offered first ("" : none does)


@dataclass(frozen=True)
class MissedList:
    extracted: bool  # False: the document has no result yet (pending, failed): nothing to check
    checked: bool  # False: a result from before the recall check
    views: list[MissedView]
    fillable: list[tuple[str, str]]  # (path, label) of the empty numeric fields a number may fill
    action: str

    @property
    def open_count(self) -> int:
        return sum(1 for view in self.views if view.review is None)


def missed_image_url(item_id: int, key: str, page: int | None = None) -> str:
    """An item's page image; its key names the place it highlights, ``v`` how it is drawn (so the
    address changes with the drawing: it is cached for good)."""
    query: dict[str, object] = {"missed": key}
    if page is not None:
        query["page"] = page
    query["v"] = DRAWING
    return f"{PREFIX}/items/{item_id}/page.png?{urlencode(query)}"


def number_fields(ledger: Ledger, batch_id: int) -> set[tuple[str, str]]:
    """(module, field) of the batch's frozen template that hold numbers."""
    template = definition_of(template_of_batch(ledger, batch_id))
    return {(m.name, f.name) for m in template.all_modules() for f in m.fields if f.type in NUMERIC}


def missed_list(
    ledger: Ledger, batch_id: int, item: ItemListing | ItemRow, reviews: dict[tuple[int, str], MissedReview]
) -> MissedList:
    item_id = int(item["id"])
    listed = missed_of(item["result_json"])
    decided = {path for (item_key, path) in decisions.current_decisions(ledger, batch_id) if item_key == item_id}
    fillable = _fillable(item, number_fields(ledger, batch_id), decided) if listed else []
    views = [
        MissedView(
            entry,
            reviews.get((item_id, entry.key)),
            f"{MISSED_PREFIX}{entry.key}",
            f"{PREFIX}/batches/{batch_id}/documents/{item_id}?{urlencode({'value': MISSED_PREFIX + entry.key})}",
            missed_image_url(item_id, entry.key),
            f"possibly missed {entry.kind.value} · p.{entry.page}",
            _proposed(entry, fillable),
        )
        for entry in listed or []
    ]
    extracted = item["status"] == "completed"
    return MissedList(extracted, listed is not None, views, fillable, f"{PREFIX}/items/{item_id}/missed")


def _fillable(item: ItemListing | ItemRow, numbers: set[tuple[str, str]], decided: set[str]) -> list[tuple[str, str]]:
    """The numeric fields of the document's entries (outcomes, arms) the model left empty and no
    reviewer has decided yet (a correction is never overwritten from here), each labelled with its
    outcome's name and its arm ("outcomes 3 (PONV · H2) · events"; an arm entry by its name)."""
    if not item["result_json"]:
        return []
    fields = fields_of(json.loads(item["result_json"]))
    names: dict[tuple[str | None, int | None], list[str]] = {}
    for entry in fields.values():
        if entry.field in NAMING_FIELDS and entry.value is not None:
            names.setdefault((entry.module, entry.index), []).append(str(entry.value)[:40])
    found = []
    for path, entry in fields.items():
        module = entry.module or path.split(".")[0]
        if entry.value is not None or entry.index is None or (module, entry.field) not in numbers or path in decided:
            continue
        named = " · ".join(names.get((entry.module, entry.index), []))
        entry_word = module[:-1] if module.endswith("s") else module
        found.append((path, f"{named or f'{entry_word} {entry.index}'}: {entry.field.replace('_', ' ')}"))
    return found


def _words(text: str) -> set[str]:
    return {word[:5] for word in re.findall(r"[a-z]{4,}", text.lower())}


def _proposed(item: PossiblyMissed, fillable: list[tuple[str, str]]) -> str:
    """The one empty field whose entry and field the item's label and reason name best (by their
    words), "" when none does or several do equally: a reviewer then chooses, never a silent
    first option."""
    wanted = _words(f"{item.label} {item.why}")
    scored = [(len(wanted & _words(label)), path) for path, label in fillable]
    best = max((score for score, _path in scored), default=0)
    chosen = [path for score, path in scored if score == best]
    return chosen[0] if best > 0 and len(chosen) == 1 else ""  # a tie is the reviewer's to choose


def missed_anchor(item: ItemRow, key: str) -> dict[str, Any] | None:
    """Where a listed item is, in the shape the page image takes a quote's place."""
    entry = next((m for m in missed_of(item["result_json"]) or [] if m.key == key), None)
    if entry is None:
        return None
    place = {"page": entry.page, "source": entry.source, "start": entry.start, "end": entry.end}
    return place | {"cells": [list(cell) for cell in entry.cells]} if entry.cells else place


async def review_missed(request: Request) -> Response:
    """Dismiss, reopen, or turn into a value one item of a document's possibly-missed list."""
    ledger, settings = ledger_of(request), settings_of(request)
    item_id = request.path_params["item_id"]
    reviewer = signed_in(request)  # who asks, before anything of the form is read
    if isinstance(reviewer, Response):
        return reviewer
    form = await read_form(request)
    item = get_item(ledger, item_id)
    if item is None:
        return PlainTextResponse(f"unknown item {item_id}\n", status_code=404)
    key = text_field(form, "key", 200)
    back = f"{PREFIX}/batches/{item['batch_id']}/documents/{item_id}?{urlencode({'value': MISSED_PREFIX + key})}"
    response = RedirectResponse(back, status_code=303)
    action = text_field(form, "action", 20)
    try:
        if action == "dismiss":
            record_missed_review(
                ledger, item_id=item_id, key=key, action=MissedAction.DISMISSED, reviewer=reviewer.name
            )
            set_flash(response, f"dismissed by {reviewer.name}")
        elif action == "reopen":
            record_missed_review(ledger, item_id=item_id, key=key, action=MissedAction.REOPENED, reviewer=reviewer.name)
            set_flash(response, "reopened")
        elif action == "add":
            message = _turn_into_value(ledger, settings, item, key, reviewer.name, form)
            set_flash(response, message)
        else:
            set_flash(response, f"unknown action {action!r}", error=True)
    except (ConfigError, ValueError) as exc:
        set_flash(response, str(exc), error=True)
    return response


def _turn_into_value(ledger: Ledger, settings: Settings, item: ItemRow, key: str, reviewer: str, form: FormData) -> str:
    listed = {m.key: m for m in missed_of(item["result_json"]) or []}
    if key not in listed:
        raise ConfigError(f"this document lists no possibly missed {key!r}")
    path = text_field(form, "path", 300)
    decided = {p for (item_key, p) in decisions.current_decisions(ledger, item["batch_id"]) if item_key == item["id"]}
    if path not in {p for p, _label in _fillable(item, number_fields(ledger, item["batch_id"]), decided)}:
        raise ConfigError("choose one of the document's empty number fields that no reviewer has decided")
    outcome = corrections.correct(
        ledger,
        item_id=item["id"],
        path=path,
        reviewer=reviewer,
        seen_seq=0,  # an undecided field: a decision made meanwhile is a conflict, never overwritten
        value_text=text_field(form, "value", 200),
        quote=text_field(form, "quote", 5000) or listed[key].text,
        comment="from the possibly-missed list",
        options=settings.parse_options(),
    )
    if outcome.kind != decisions.RECORDED:
        raise ConfigError(f"{field_title(path)}: {outcome.message}")
    record_missed_review(ledger, item_id=item["id"], key=key, action=MissedAction.ADDED, reviewer=reviewer, path=path)
    return f"{field_title(path)}: {outcome.message}"


ROUTES = [Route(f"{PREFIX}/items/{{item_id:id}}/missed", review_missed, methods=["POST"])]
