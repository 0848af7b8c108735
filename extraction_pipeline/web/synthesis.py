"""The batch's evidence as an analyst reads it, on the batch page: a forest plot per outcome
(each study linking to its review page) and the Risk-of-Bias traffic lights with their summary
bars; and the form with which a reviewer pools differently named outcomes as one.

The pictures are SVG drawn by ``core/synthesis`` (the workbook embeds the same drawings): every
text they place is escaped there, so the page includes them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.batches import get_batch
from extraction_pipeline.core.synthesis.batch import (
    BatchSynthesis,
    OutcomeSynthesis,
    batch_synthesis,
    set_outcome_label,
)
from extraction_pipeline.core.synthesis.forest import forest_svg, shown
from extraction_pipeline.core.synthesis.risk_of_bias import batch_risk_of_bias, summary_svg, traffic_light_svg
from extraction_pipeline.web.deps import ledger_of, signed_in
from extraction_pipeline.web.forms import read_form, set_flash, text_field
from extraction_pipeline.web.pages import message_page
from extraction_pipeline.web.urls import PREFIX

MAX_NAMES = 50


@dataclass(frozen=True)
class OutcomeView:
    outcome: OutcomeSynthesis
    picture: Markup | None  # the forest plot, for outcomes with two studies or more
    estimate: str  # the one study's estimate [CI], for outcomes with one


@dataclass(frozen=True)
class SynthesisView:
    pooled: list[OutcomeView]
    single: list[OutcomeView]
    left_out: tuple[str, ...]
    labels: list[str]  # every outcome's current label, offered when grouping
    error: str | None
    traffic_lights: Markup | None
    summary: Markup | None


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
        picture = Markup(forest_svg(outcome, link)) if outcome.pooled else None  # noqa: S704 (escaped in core)
        views.append(OutcomeView(outcome, picture, shown(result.ratio, first.estimate, first.ci_lower, first.ci_upper)))
    rob = batch_risk_of_bias(ledger, batch_id)
    drawn = rob is not None and bool(rob.studies)
    return SynthesisView(
        pooled=[view for view in views if view.picture is not None],
        single=[view for view in views if view.picture is None],
        left_out=synthesis.left_out,
        labels=sorted({view.outcome.result.outcome for view in views}),
        error=error,
        traffic_lights=Markup(traffic_light_svg(rob, link)) if rob is not None and drawn else None,  # noqa: S704
        summary=Markup(summary_svg(rob)) if rob is not None and drawn else None,  # noqa: S704
    )


async def label_outcome(request: Request) -> Response:
    """Pool the outcome(s) named in the form under the label typed (empty: their own names)."""
    ledger = ledger_of(request)
    batch_id = request.path_params["batch_id"]
    form = await read_form(request)
    if get_batch(ledger, batch_id) is None:
        return message_page("Batch", error=f"unknown batch {batch_id}", status_code=404)
    reviewer = signed_in(request)
    if isinstance(reviewer, Response):
        return reviewer
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


ROUTES = [Route(f"{PREFIX}/batches/{{batch_id:id}}/outcome-labels", label_outcome, methods=["POST"])]
