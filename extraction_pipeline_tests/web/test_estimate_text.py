"""The estimate in words (web/estimate_text.py), the same on the page and in the terminal:
dollars, durations, the answer length's and the budget's sources, the template's label."""

from __future__ import annotations

from extraction_pipeline.core.extraction.estimate import NewBatchTemplate
from extraction_pipeline.core.extraction.pace import NO_BUDGET_NEEDED, CallBudget, Limit, LimitOrigin
from extraction_pipeline.core.extraction.token_counts import AnswerLength
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE
from extraction_pipeline.web.estimate_text import answer_source, budget_source, duration, money, template_label

MODEL = "openai/gpt-4o-mini"


def test_money_and_durations() -> None:
    assert money(0.00469, "") == "$0.0047" and money(1234.5, "") == "$1,234.50"
    assert money(None, "litellm has no price for x") == "litellm has no price for x"
    assert money(None, "") == "price unknown"
    assert duration(None) == "no budget known" and duration(0.4) == "under a minute"
    assert duration(42.2) == "about 42 min" and duration(150) == "about 2.5 h"


def test_the_answer_length_says_what_it_rests_on() -> None:
    assert answer_source(AnswerLength(MODEL, 1057, 0)) == (
        f"default 1,057 tokens per call (the corpus median answer; no stored answer of {MODEL})"
    )
    assert answer_source(AnswerLength(MODEL, 812, 2)) == f"median of 2 stored answer(s) of {MODEL}: 812 tokens per call"


def test_the_budget_says_where_each_limit_comes_from() -> None:
    assert budget_source(CallBudget()) == "no budget known"
    assert budget_source(NO_BUDGET_NEEDED) == "no budget needed"
    both = CallBudget(Limit(200_000, LimitOrigin.CONFIGURED), Limit(2, LimitOrigin.LEARNED))
    assert budget_source(both) == "200,000 tokens/min (configured), 2 requests/min (learned from the provider)"
    assert (
        budget_source(CallBudget(requests=Limit(500, LimitOrigin.BOTH))) == "500 requests/min (configured and learned)"
    )


def test_the_template_label_is_the_ledgers_and_says_when_it_is_saved() -> None:
    builtin = BASE_TEMPLATES[RCT_BASE]
    base = f"{builtin.base} base v{builtin.base_version}"
    assert template_label(NewBatchTemplate(builtin, "trials", 1, saved=False)) == (
        f"trials v1 ({base}; saved when the batch starts)"
    )
    assert template_label(NewBatchTemplate(builtin, "trials", 3, saved=True)) == f"trials v3 ({base})"
