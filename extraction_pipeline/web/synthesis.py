"""The batch's evidence as an analyst reads it, on the batch page: a forest plot per outcome
(each study linking to its review page) and the Risk-of-Bias traffic lights with their summary
bars; the same pictures as SVG, PNG and PDF files; the form with which a reviewer pools
differently named outcomes as one; and the comparisons: per comparison, each study's arms on the
intervention side, the comparator side or not in it (proposed from the arm names, changed here,
recorded in the ledger), a forest plot per outcome of each comparison.

The pictures are matplotlib figures drawn by ``core/synthesis`` (the workbook embeds the same
drawings) and written as SVG there, every text escaped by matplotlib's writer, so the page
includes them as they are. Downloads are open to whoever may read the batch page, as the
workbook and the CSV are (``downloads``); a forest plot is named by its outcome and measure, so
its address still holds when the page lists outcomes in another order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.synthesis.batch import (
    BatchSynthesis,
    ComparisonView,
    OutcomeSynthesis,
    Problem,
    add_comparison,
    batch_synthesis,
    drop_comparison,
    set_outcome_label,
    set_sides,
)
from extraction_pipeline.core.synthesis.comparisons import DEFAULT_COMPARISON, SIDES
from extraction_pipeline.core.synthesis.figures import MEDIA_TYPES, PRINT_DPI, Format, render, svg_text
from extraction_pipeline.core.synthesis.forest import forest_figure, shown
from extraction_pipeline.core.synthesis.risk_of_bias import (
    RiskOfBias,
    batch_risk_of_bias,
    summary_figure,
    traffic_light_figure,
)
from extraction_pipeline.web.deps import ledger_of, signed_in
from extraction_pipeline.web.forms import read_form, set_flash, text_field
from extraction_pipeline.web.pages import message_page
from extraction_pipeline.web.urls import PREFIX

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from starlette.datastructures import FormData

    from extraction_pipeline.core.ledger.users import User

MAX_NAMES = 50
FORMATS: tuple[Format, ...] = ("svg", "png", "pdf")
ROB_PICTURES: dict[str, Callable[[RiskOfBias], Figure]] = {
    "traffic-lights": traffic_light_figure,
    "summary": summary_figure,
}


@dataclass(frozen=True)
class OutcomeView:
    outcome: OutcomeSynthesis
    picture: Markup | None  # the forest plot, for outcomes with two studies or more
    estimate: str  # the one study's estimate [CI], for outcomes with one
    downloads: tuple[tuple[str, str], ...] = ()  # (format, address) of the forest plot's files


@dataclass(frozen=True)
class SynthesisView:
    pooled: list[OutcomeView]
    single: list[OutcomeView]
    left_out: tuple[str, ...]
    labels: list[str]  # every outcome's current label, offered when grouping
    error: str | None
    traffic_lights: Markup | None
    summary: Markup | None
    traffic_light_downloads: tuple[tuple[str, str], ...] = ()
    summary_downloads: tuple[tuple[str, str], ...] = ()
    comparisons: tuple[ComparisonView, ...] = ()
    sides: tuple[str, ...] = SIDES
    default_comparison: str = DEFAULT_COMPARISON  # always pooled: it has no Remove button
    problems: tuple[Problem, ...] = ()  # the left-out rows grouped by why, with the studies to fix

    def pooled_in(self, comparison: str) -> list[OutcomeView]:
        return [view for view in self.pooled if view.outcome.comparison == comparison]


def forest_url(batch_id: int, outcome: OutcomeSynthesis, fmt: str) -> str:
    query = urlencode({"outcome": outcome.result.outcome, "measure": outcome.result.measure})
    if outcome.comparison != DEFAULT_COMPARISON:
        query += "&" + urlencode({"comparison": outcome.comparison})
    return f"{PREFIX}/batches/{batch_id}/forest.{fmt}?{query}"


def risk_of_bias_url(batch_id: int, picture: str, fmt: str) -> str:
    return f"{PREFIX}/batches/{batch_id}/risk-of-bias/{picture}.{fmt}"


def synthesis_view(ledger: Ledger, batch_id: int) -> SynthesisView:
    def link(item_id: int) -> str:
        return f"{PREFIX}/batches/{batch_id}/documents/{item_id}"

    error = None
    try:
        synthesis = batch_synthesis(ledger, batch_id)
    except ConfigError as exc:  # a value the reader refuses: said on the page, never a 500
        synthesis, error = BatchSynthesis((), ()), str(exc)
    views = []
    for outcome in synthesis.outcomes:
        result, first = outcome.result, outcome.rows[0].effect
        estimate = shown(result.ratio, first.estimate, first.ci_lower, first.ci_upper)
        if not outcome.pooled:
            views.append(OutcomeView(outcome, None, estimate))
            continue
        picture = Markup(svg_text(forest_figure(outcome, link)))  # noqa: S704 (escaped by matplotlib)
        downloads = tuple((fmt.upper(), forest_url(batch_id, outcome, fmt)) for fmt in FORMATS)
        views.append(OutcomeView(outcome, picture, estimate, downloads))
    rob = batch_risk_of_bias(ledger, batch_id)
    drawn = rob is not None and bool(rob.studies)
    return SynthesisView(
        pooled=[view for view in views if view.picture is not None],
        single=[view for view in views if view.picture is None],
        left_out=synthesis.left_out,
        labels=sorted({view.outcome.result.outcome for view in views}),
        error=error,
        traffic_lights=Markup(svg_text(traffic_light_figure(rob, link))) if rob is not None and drawn else None,  # noqa: S704
        summary=Markup(svg_text(summary_figure(rob))) if rob is not None and drawn else None,  # noqa: S704
        traffic_light_downloads=tuple((f.upper(), risk_of_bias_url(batch_id, "traffic-lights", f)) for f in FORMATS),
        summary_downloads=tuple((f.upper(), risk_of_bias_url(batch_id, "summary", f)) for f in FORMATS),
        comparisons=synthesis.comparisons,
        problems=synthesis.problems,
    )


async def _batch_form(request: Request) -> tuple[Ledger, int, FormData, User] | Response:
    """A batch page's form post: the ledger, the batch, the form and who sent it, or the page to
    answer with (an unknown batch, a visitor not signed in)."""
    ledger = ledger_of(request)
    batch_id = request.path_params["batch_id"]
    reviewer = signed_in(request)  # who asks, before anything of the form is read
    if isinstance(reviewer, Response):
        return reviewer
    if get_batch(ledger, batch_id) is None:
        return message_page("Batch", error=f"unknown batch {batch_id}", status_code=404)
    form = await read_form(request)
    return ledger, batch_id, form, reviewer


async def label_outcome(request: Request) -> Response:
    """Pool the outcome(s) named in the form under the label typed (empty: their own names)."""
    asked = await _batch_form(request)
    if isinstance(asked, Response):
        return asked
    ledger, batch_id, form, reviewer = asked
    response = RedirectResponse(f"{PREFIX}/batches/{batch_id}#synthesis", status_code=303)
    names = [name[:500] for name in form.getlist("name") if isinstance(name, str) and name.strip()][:MAX_NAMES]
    label = text_field(form, "label", 1000)
    if not names:
        set_flash(response, "no outcome was named", error=True)
        return response
    try:
        for name in names:
            set_outcome_label(ledger, batch_id, name, label, reviewer.name)
    except ConfigError as exc:
        set_flash(response, str(exc), error=True)
        return response
    what = ", ".join(repr(name) for name in names)
    set_flash(response, f"{what} pooled as {label!r}" if label else f"{what} pooled under its own name again")
    return response


async def save_comparison(request: Request) -> Response:
    """Name a new comparison (``new``), remove one (``remove``), or save the sides of
    ``comparison``'s arms (fields ``side:DOCUMENT:ARM``)."""
    asked = await _batch_form(request)
    if isinstance(asked, Response):
        return asked
    ledger, batch_id, form, reviewer = asked
    response = RedirectResponse(f"{PREFIX}/batches/{batch_id}#comparisons", status_code=303)
    try:
        new = text_field(form, "new", 1000)
        if new.strip():
            name = await run_in_threadpool(add_comparison, ledger, batch_id, new, reviewer.name)
            set_flash(response, f"comparison {name!r} added: its arms start on their proposed sides")
            return response
        removed = text_field(form, "remove", 1000)
        if removed.strip():
            await run_in_threadpool(drop_comparison, ledger, batch_id, removed, reviewer.name)
            set_flash(response, f"comparison {removed!r} removed")
            return response
        comparison = text_field(form, "comparison", 1000)
        sides: dict[tuple[int, str], str] = {}
        for key, value in form.multi_items():
            prefix, _sep, rest = key.partition(":")
            document, _sep, arm = rest.partition(":")
            if prefix == "side" and document.isdigit() and arm and isinstance(value, str):
                sides[(int(document), arm[:100])] = value
        changed = await run_in_threadpool(set_sides, ledger, batch_id, comparison, sides, reviewer.name)
    except ConfigError as exc:
        set_flash(response, str(exc), error=True)
        return response
    set_flash(response, f"{comparison!r}: {changed} arm(s) moved to another side")
    return response


def _format(request: Request) -> Format | None:
    fmt = request.path_params["fmt"]
    return next((known for known in FORMATS if known == fmt), None)


def _file(picture: bytes, fmt: Format, name: str) -> Response:
    headers = {"content-disposition": f'attachment; filename="{name}.{fmt}"'}
    return Response(picture, media_type=MEDIA_TYPES[fmt], headers=headers)


def _slug(text: str) -> str:
    """A file name's part from an outcome's name: what a name can hold everywhere."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "outcome"


def _forest_file(
    ledger: Ledger, batch_id: int, outcome: str, measure: str, comparison: str, fmt: Format
) -> bytes | None:
    try:
        synthesis = batch_synthesis(ledger, batch_id)
    except ConfigError:
        return None  # the page says why nothing is pooled
    found = next(
        (
            o
            for o in synthesis.pooled
            if o.result.outcome == outcome and o.result.measure == measure and o.comparison == comparison
        ),
        None,
    )
    return render(forest_figure(found), fmt, PRINT_DPI) if found is not None else None


async def forest_download(request: Request) -> Response:
    """One outcome's forest plot as a file (``?outcome=…&measure=…``, and ``&comparison=…`` for a
    comparison the analyst named)."""
    ledger = ledger_of(request)
    batch_id = request.path_params["batch_id"]
    fmt = _format(request)
    if fmt is None:
        return PlainTextResponse(f"no such format: choose one of {', '.join(FORMATS)}\n", status_code=404)
    if get_batch(ledger, batch_id) is None:
        return PlainTextResponse(f"unknown batch {batch_id}\n", status_code=404)
    outcome, measure = request.query_params.get("outcome", ""), request.query_params.get("measure", "")
    comparison = request.query_params.get("comparison", DEFAULT_COMPARISON)
    picture = await run_in_threadpool(_forest_file, ledger, batch_id, outcome, measure, comparison, fmt)
    if picture is None:
        return PlainTextResponse("no forest plot of that outcome and measure in this batch\n", status_code=404)
    named = "" if comparison == DEFAULT_COMPARISON else f"-{_slug(comparison)}"
    return _file(picture, fmt, f"batch-{batch_id}-forest-{_slug(outcome)}{named}-{_slug(measure)}")


def _risk_of_bias_file(ledger: Ledger, batch_id: int, picture: str, fmt: Format) -> bytes | None:
    rob = batch_risk_of_bias(ledger, batch_id)
    if rob is None or not rob.studies:
        return None
    return render(ROB_PICTURES[picture](rob), fmt, PRINT_DPI)


async def risk_of_bias_download(request: Request) -> Response:
    """The traffic lights or the summary bars as a file."""
    ledger = ledger_of(request)
    batch_id, picture = request.path_params["batch_id"], request.path_params["picture"]
    fmt = _format(request)
    if fmt is None or picture not in ROB_PICTURES:
        return PlainTextResponse("no such picture\n", status_code=404)
    if get_batch(ledger, batch_id) is None:
        return PlainTextResponse(f"unknown batch {batch_id}\n", status_code=404)
    drawn = await run_in_threadpool(_risk_of_bias_file, ledger, batch_id, picture, fmt)
    if drawn is None:
        return PlainTextResponse("no risk-of-bias judgements in this batch\n", status_code=404)
    return _file(drawn, fmt, f"batch-{batch_id}-risk-of-bias-{picture}")


ROUTES = [
    Route(f"{PREFIX}/batches/{{batch_id:id}}/outcome-labels", label_outcome, methods=["POST"]),
    Route(f"{PREFIX}/batches/{{batch_id:id}}/comparisons", save_comparison, methods=["POST"]),
    Route(f"{PREFIX}/batches/{{batch_id:id}}/forest.{{fmt}}", forest_download, methods=["GET"]),
    Route(f"{PREFIX}/batches/{{batch_id:id}}/risk-of-bias/{{picture}}.{{fmt}}", risk_of_bias_download, methods=["GET"]),
]
