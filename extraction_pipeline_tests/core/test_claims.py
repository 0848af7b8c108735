"""Claims with their context, checked as a batch checks a model's numbers: on PDFs written with
PyMuPDF and parsed by the real engine, so what is printed where is known."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from extraction_pipeline.core.pdf.engine import EngineOptions, parse_pdf
from extraction_pipeline.core.pdf.model import ParsedDocument
from extraction_pipeline.core.synthetic import ThreeArmTrial, make_three_arm_trial, write_three_arm_report
from extraction_pipeline.core.verification.claims import (
    Claim,
    ClaimsError,
    check_claims,
    claims_answer,
    read_claims,
)

OUTCOME = "primary outcome"
CONTINUOUS_PAGES = [
    "Methods. Adults with type 2 diabetes were randomized to lomacitinib or placebo.\n",
    "Results at 26 weeks.\n"
    "At 26 weeks, HbA1c fell by a mean of 1.42 (SD 0.61) in the 88 patients with lomacitinib "
    "and by 0.97 (SD 0.58) in the 90 patients with placebo.\n",
]


@pytest.fixture(scope="module")
def trial() -> ThreeArmTrial:
    trial = make_three_arm_trial(1)
    numbers = [n for arm in trial.arms for n in (arm.events, arm.randomized_n)]
    assert len(set(numbers)) == len(numbers)  # every number printed once: a wrong one cannot be found by luck
    return trial


def _parsed(path: Path) -> ParsedDocument:
    result = parse_pdf(path, EngineOptions(table_detection="off"))
    return ParsedDocument(path.stem, result["pages_text"])


@pytest.fixture(scope="module")
def three_arm(trial: ThreeArmTrial, tmp_path_factory: pytest.TempPathFactory) -> ParsedDocument:
    return _parsed(write_three_arm_report(trial, tmp_path_factory.mktemp("three-arm")))


@pytest.fixture(scope="module")
def continuous(tmp_path_factory: pytest.TempPathFactory) -> ParsedDocument:
    import pymupdf

    path = tmp_path_factory.mktemp("continuous") / "continuous.pdf"
    with pymupdf.open() as doc:
        for text in CONTINUOUS_PAGES:
            doc.new_page(width=595, height=842).insert_textbox(
                pymupdf.Rect(56, 56, 539, 786), text, fontsize=11, fontname="helv"
            )
        doc.save(path)
    return _parsed(path)


def _line(**fields: Any) -> str:
    return json.dumps(fields)


def _arm_quote(trial: ThreeArmTrial, arm: int) -> str:
    """The part of the events sentence about one arm, as printed."""
    chosen = trial.arms[arm]
    tail = " patients" if arm == 0 else ""
    return f"{chosen.events} of {chosen.randomized_n}{tail} with {chosen.name}"


def _claims(*lines: str) -> list[Claim]:
    return read_claims(lines)


def _events_and_total(trial: ThreeArmTrial, arm: int, versus: int, entry: object, **extra: Any) -> list[str]:
    chosen, other = trial.arms[arm], trial.arms[versus]
    common = {"outcome": OUTCOME, "arm": chosen.name, "versus": other.name, "entry": entry, **extra}
    quote = _arm_quote(trial, arm)
    return [
        _line(quote=quote, value=chosen.events, kind="events", **common),
        _line(quote=quote, value=chosen.randomized_n, kind="total", **common),
    ]


def test_right_claims_come_back_verified_without_flags_in_their_order(
    trial: ThreeArmTrial, three_arm: ParsedDocument
) -> None:
    lines = [
        *_events_and_total(trial, 2, 0, 1),  # placebo first: the order given is the order answered
        *_events_and_total(trial, 0, 2, 1),
        *_events_and_total(trial, 1, 2, "second"),
        *_events_and_total(trial, 2, 1, "second"),
    ]
    claims = _claims(*lines)
    verdicts = check_claims(three_arm, claims)
    assert [v.claim.line for v in verdicts] == list(range(1, 9))
    assert [v.claim.value for v in verdicts] == [json.loads(line)["value"] for line in lines]
    assert [(v.status, v.flags, v.page) for v in verdicts] == [("verified", (), 1)] * 8, verdicts
    assert all(v.reason for v in verdicts)
    # one outcome entry per comparison and arm: placebo has one in each comparison
    assert [v.field for v in verdicts] == [
        "outcomes.1.events", "outcomes.1.total", "outcomes.2.events", "outcomes.2.total",
        "outcomes.3.events", "outcomes.3.total", "outcomes.4.events", "outcomes.4.total",
    ]  # fmt: skip


def test_a_value_not_in_its_quote_or_a_quote_not_in_the_paper_is_unverified(
    trial: ThreeArmTrial, three_arm: ParsedDocument
) -> None:
    low = trial.arms[0]
    common = {"outcome": OUTCOME, "arm": low.name, "versus": "placebo"}
    quote = _arm_quote(trial, 0)
    forged = quote.replace(f"{low.events} of", f"{low.events + 1} of")
    claims = _claims(
        _line(quote=quote, value=low.events + 1, kind="events", **common),
        _line(quote=forged, value=low.randomized_n, kind="total", **common),
    )
    wrong_value, forged_quote = check_claims(three_arm, claims)
    assert (wrong_value.status, wrong_value.reason) == ("unverified", "value not in quote")
    assert wrong_value.page == 1  # the quote itself was found
    assert forged_quote.status == "unverified" and "numbers differ" in forged_quote.reason, forged_quote


def test_the_batch_checks_flag_numbers_each_verified_on_its_own(
    trial: ThreeArmTrial, three_arm: ParsedDocument
) -> None:
    """Events and total swapped: each number is in its quote, but no arm has more events than
    participants: the batch's checks say so on the claim."""
    low = trial.arms[0]
    common = {"outcome": OUTCOME, "arm": low.name, "versus": "placebo"}
    quote = _arm_quote(trial, 0)
    events, total = check_claims(
        three_arm,
        _claims(
            _line(quote=quote, value=low.randomized_n, kind="events", **common),
            _line(quote=quote, value=low.events, kind="total", **common),
        ),
    )
    assert events.status == "verified" and total.status == "verified"
    assert events.flags == (f"{low.randomized_n} events exceed the {low.events} participants of the arm",)
    assert total.flags == ()


def test_a_page_the_quote_is_not_on_is_flagged(trial: ThreeArmTrial, three_arm: ParsedDocument) -> None:
    low = trial.arms[0]
    common = {"outcome": OUTCOME, "arm": low.name, "versus": "placebo", "kind": "events", "value": low.events}
    quote = _arm_quote(trial, 0)
    right, wrong = check_claims(
        three_arm,
        _claims(_line(quote=quote, page=1, **common), _line(quote=quote, page=2, **{**common, "entry": "b"})),
    )
    assert right.flags == () and right.page == 1
    assert wrong.status == "verified" and wrong.page == 1
    assert wrong.flags == ("the claim says page 2, but the quote is on page 1",)
    not_found = check_claims(three_arm, _claims(_line(quote="nowhere in the paper 12", page=2, **common)))[0]
    assert not_found.status == "unverified" and not_found.flags == ()  # the reason says it: not found


def test_continuous_claims_with_a_time_point(continuous: ParsedDocument) -> None:
    common = {"outcome": "HbA1c", "timepoint": "26 weeks", "entry": 1}
    drug = "fell by a mean of 1.42 (SD 0.61) in the 88 patients with lomacitinib"
    placebo = "by 0.97 (SD 0.58) in the 90 patients with placebo"
    claims = _claims(
        _line(quote=drug, value=1.42, kind="mean", arm="lomacitinib", versus="placebo", **common),
        _line(quote=drug, value=0.61, kind="sd", arm="lomacitinib", versus="placebo", **common),
        _line(quote=drug, value=88, kind="n", arm="lomacitinib", versus="placebo", **common),
        _line(quote=placebo, value=0.97, kind="mean", arm="placebo", versus="lomacitinib", **common),
        _line(quote=placebo, value=0.58, kind="sd", arm="placebo", versus="lomacitinib", **common),
        _line(quote=placebo, value=89, kind="n", arm="placebo", versus="lomacitinib", **common),
    )
    verdicts = check_claims(continuous, claims)
    assert [(v.status, v.page, v.flags) for v in verdicts[:5]] == [("verified", 2, ())] * 5, verdicts
    assert (verdicts[5].status, verdicts[5].reason) == ("unverified", "value not in quote")  # 90 printed, 89 claimed
    answer = claims_answer(claims)
    assert [entry["outcome_type"]["value"] for entry in answer["outcomes"]] == ["continuous", "continuous"]
    assert [entry["timepoint"]["value"] for entry in answer["outcomes"]] == ["26 weeks", "26 weeks"]


def test_the_answer_declares_the_arms_one_entry_per_arm_and_comparison_and_the_pairing() -> None:
    common = {"quote": "12 of 80", "value": 12, "kind": "events"}
    claims = _claims(
        _line(outcome="Death", arm="Drug 10 mg", versus="Placebo", timepoint="1 year", **common),
        _line(outcome="death", arm="placebo", versus="drug 10 mg", timepoint="1 year", **common),
        _line(outcome="Death", arm="Drug 20 mg", versus="Placebo", **common),
        _line(outcome="Death", arm="Drug 10 mg", versus="Placebo", timepoint="1 year", **{**common, "kind": "total"}),
    )
    answer = claims_answer(claims)
    assert [arm["arm_name"]["value"] for arm in answer["arms"]] == ["Drug 10 mg", "Placebo", "Drug 20 mg"]
    outcomes = answer["outcomes"]
    assert [(o["arm"]["value"], o["outcome_type"]["value"]) for o in outcomes] == [
        ("Drug 10 mg", "dichotomous"),
        ("placebo", "dichotomous"),
        ("Drug 20 mg", "dichotomous"),
    ]
    assert outcomes[0]["total"] == {"value": 12, "quote": "12 of 80"}  # line 4 joined line 1's entry
    assert "timepoint" not in outcomes[2] and outcomes[0]["timepoint"] == {"value": "1 year"}
    assert answer["comparisons"] == [
        {
            "outcome_name": {"value": "Death"},
            "arm": {"value": "Drug 10 mg"},
            "comparator_arm": {"value": "Placebo"},
            "timepoint": {"value": "1 year"},
        },
        {"outcome_name": {"value": "Death"}, "arm": {"value": "Drug 20 mg"}, "comparator_arm": {"value": "Placebo"}},
    ]


def test_every_bad_line_is_named_with_its_problem_and_nothing_is_read() -> None:
    good = {"quote": "12 of 80", "value": 12, "kind": "events", "outcome": "Death", "arm": "A", "versus": "B"}
    lines = [
        _line(**good),
        "",  # blank lines are skipped but counted
        "not json",
        json.dumps([good]),
        _line(**{k: v for k, v in good.items() if k not in ("arm", "quote")}),
        _line(**{**good, "kind": "hazard"}),
        _line(**{**good, "value": "12"}),
        _line(**{**good, "kind": "total", "value": 80.5}),
        _line(**{**good, "timpoint": "1 year"}),
        _line(**{**good, "page": 0}),
        _line(**{**good, "versus": "a"}),
        _line(**good),  # a second events for arm A in the same comparison
        _line(**{**good, "entry": 7}),
        _line(**{**good, "entry": 7, "arm": "B", "versus": "C"}),
        _line(**{**good, "entry": 7, "arm": "B", "versus": "A", "kind": "mean", "outcome": "Stroke"}),
        _line(**{**good, "value": True, "kind": "total"}),
    ]
    with pytest.raises(ClaimsError) as raised:
        read_claims(lines)
    problems = dict(raised.value.problems)
    assert sorted(problems) == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16], problems
    assert problems[3].startswith("not a JSON line")
    assert problems[4] == "not a JSON object"
    assert problems[5] == "missing required field(s) 'quote', 'arm'"
    assert 'unknown kind "hazard"' in problems[6]
    assert problems[7] == "'value' must be a number, got \"12\""
    assert "must be a whole number, got 80.5" in problems[8]
    assert "unknown field(s) 'timpoint'" in problems[9]
    assert "'page' must be a page number" in problems[10]
    assert "'versus' names the same arm as 'arm'" in problems[11]
    assert problems[12] == 'a second "events" for the arm "A" (first on line 1)'
    assert problems[14] == 'entry "7" (line 13) compares "A" with "B", not "B" with "C"'
    assert 'is about the outcome "Death", not "Stroke"' in problems[15]
    assert 'kind "mean" is continuous, but entry "7" (line 13) is dichotomous' in problems[15]
    assert problems[16] == "'value' must be a number, got true"
    assert "line 3: not a JSON line" in str(raised.value)
    assert read_claims(lines[:2]) and check_claims(ParsedDocument("empty", [""]), []) == []
