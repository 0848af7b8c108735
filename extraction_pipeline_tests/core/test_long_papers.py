"""A synthetic 300-page trial report against a small context limit: extracted in parts (real
PDF, real parse, real HTTP to the fake model), merged, de-duplicated, grounded on the right pages;
the parts paid once; a paper that cannot fit refused with its reason."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.extraction.grounded import GroundedValue
from extraction_pipeline.core.extraction.long_papers import merge_parts, plan_parts
from extraction_pipeline.core.extraction.prompts import document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.llm.gateway import LLMConfig
from extraction_pipeline.core.pdf.engine import EngineOptions
from extraction_pipeline.core.pdf.isolation import ParseOptions
from extraction_pipeline.core.pdf.parsing import parse_document
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE
from extraction_pipeline.core.verification.grounding import GroundingStatus
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json

PAGES = 300
LIMIT = 25_000  # tokens: the report needs several times that
NCT = "This trial was registered at ClinicalTrials.gov (NCT04412345)."
MORTALITY = "All-cause mortality at 52 weeks was 41 of 600 with drug and 63 of 598 with placebo."
MORTALITY_AGAIN = "At 52 weeks, all-cause mortality: 41 of 600 (drug) versus 63 of 598 (placebo)."
WEIGHT = "Body weight at 26 weeks fell by 3.1 kg (SD 2.2) with drug and 0.4 kg (SD 2.0) with placebo."
SPECIAL = {1: NCT, 120: MORTALITY, 251: WEIGHT, 280: MORTALITY_AGAIN}
FILLER = (
    "The study visits followed the schedule of assessments; procedures were performed as described in the "
    "protocol and its amendments, and source data were verified by the monitors at each site. "
)


def _report(path: Path) -> Path:
    import pymupdf

    with pymupdf.open() as doc:
        for number in range(1, PAGES + 1):
            page = doc.new_page(width=595, height=842)
            text = f"Clinical study report, page {number}\n" + FILLER * 5 + "\n" + SPECIAL.get(number, "")
            page.insert_textbox(pymupdf.Rect(56, 56, 539, 786), text, fontsize=9, fontname="helv")
        doc.save(path)
    return path


def _answer(messages: list[dict[str, str]]) -> Reply:
    """What a model reading only this part would answer: the values its pages hold, in arms (each
    part that reports results declares the arms it names)."""
    text = " ".join(document_from_messages(messages).split())
    values: dict[str, tuple[object, str]] = {}
    if NCT in text:
        values["metadata.nct_number"] = ("NCT04412345", NCT)
    entries: list[dict[str, tuple[object, str]]] = []
    for sentence in (MORTALITY, MORTALITY_AGAIN):
        if sentence in text:
            described = {"outcome_name": ("All-cause mortality", sentence), "timepoint": ("52 weeks", sentence)}
            entries.append({**described, "arm": ("drug", sentence), "events": (41, sentence)})
            entries.append({**described, "arm": ("placebo", sentence), "total": (598, sentence)})
    if WEIGHT in text:
        described = {"outcome_name": ("Body weight change", WEIGHT), "timepoint": ("26 weeks", WEIGHT)}
        entries.append({**described, "arm": ("drug", WEIGHT), "mean": (3.1, WEIGHT)})
        entries.append({**described, "arm": ("placebo", WEIGHT), "mean": (0.4, WEIGHT)})
    if entries:
        quote = next(value[1] for value in entries[0].values())
        values["arms.1.arm_name"] = ("drug", quote)
        values["arms.2.arm_name"] = ("placebo", quote)
    for number, entry in enumerate(entries, start=1):
        values.update({f"outcomes.{number}.{name}": pair for name, pair in entry.items()})
    pages = re.findall(r"\[page (\d+)\]", document_from_messages(messages))
    return Reply(extraction_json(values), tokens_in=1000 + len(pages), tokens_out=50)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _report(tmp_path_factory.mktemp("report") / "csr.pdf")


def test_a_300_page_report_is_extracted_in_parts_and_merged(
    ledger: Ledger, fake_llm: FakeLLMServer, report: Path, tmp_path: Path
) -> None:
    document = register_pdf(ledger, tmp_path / "documents", "p", report)
    create_batch(ledger, idempotency_key="csr", project="p", user="u", document_ids=[document.id])
    parsed = parse_document(
        ledger,
        sha256=document.sha256,
        stored_path=str(tmp_path / "documents" / f"{document.sha256}.pdf"),
        options=ParseOptions(limits=EngineOptions(max_pages=PAGES)),
    )
    assert parsed.pages == PAGES
    llm = LLMConfig(model="openai/fake-model", api_base=fake_llm.api_base, api_key="sk-x", context_tokens=LIMIT)
    parts = plan_parts(BASE_TEMPLATES[RCT_BASE], parsed, llm)
    assert parts is not None and len(parts) >= 3
    assert parts[0].first_page == 1 and parts[-1].last_page == PAGES
    assert all(a.last_page + 1 == b.first_page for a, b in itertools.pairwise(parts))  # in order, no gap
    fake_llm.answer = _answer
    item = 1
    outcome = extract_item(ledger, item_id=item, run_id="r1", worker="w", parsed=parsed, llm=llm)
    assert outcome.status == "completed", outcome.reason
    assert len(fake_llm.requests) == len(parts)  # one call per part
    told = [re.search(r"This is part (\d+) of (\d+)", r["messages"][-1]["content"]) for r in fake_llm.requests]
    assert [(int(m[1]), int(m[2])) for m in told if m] == [(k, len(parts)) for k in range(1, len(parts) + 1)]
    fields = outcome.result["fields"]
    assert fields["metadata.nct_number"]["value"] == "NCT04412345" and fields["metadata.nct_number"]["page"] == 1
    # Three parts report results and declare the two arms: merged by name, two arms.
    assert [fields[f"arms.{n}.arm_name"]["value"] for n in (1, 2)] == ["drug", "placebo"]
    assert "arms.3.arm_name" not in fields
    # One entry per outcome and arm: mortality reported twice is merged per arm, never across arms.
    entries = {
        (fields[f"outcomes.{n}.outcome_name"]["value"], fields[f"outcomes.{n}.arm"]["value"]): n for n in range(1, 5)
    }
    assert set(entries) == {
        ("All-cause mortality", "drug"),
        ("All-cause mortality", "placebo"),
        ("Body weight change", "drug"),
        ("Body weight change", "placebo"),
    }
    assert "outcomes.5.outcome_name" not in fields and outcome.outcomes == 2
    mortality_drug = entries["All-cause mortality", "drug"]
    assert fields[f"outcomes.{mortality_drug}.events"]["status"] == "verified"
    assert fields[f"outcomes.{mortality_drug}.events"]["page"] in (120, 280)
    assert fields[f"outcomes.{mortality_drug}.total"]["value"] is None  # the placebo arm's total stays its own
    assert fields[f"outcomes.{entries['All-cause mortality', 'placebo']}.total"]["value"] == 598
    assert fields[f"outcomes.{entries['Body weight change', 'placebo']}.mean"]["page"] == 251
    assert not any(entry["flags"] for entry in fields.values())  # every arm named is declared
    assert [p["pages"] for p in outcome.result["parts"]] == [p.label for p in parts]
    row = states.get_item(ledger, item)
    assert row is not None and row["tokens_in"] == sum(1000 + (p.last_page - p.first_page + 1) for p in parts)
    # Paid once, part by part: a second batch over the same report makes no call.
    again = create_batch(ledger, idempotency_key="csr-2", project="p", user="u", document_ids=[document.id]).id
    second = extract_item(ledger, item_id=2, run_id="r2", worker="w", parsed=parsed, llm=llm)
    assert second.status == "completed" and len(fake_llm.requests) == len(parts) and second.reused is not None
    assert again


def test_a_paper_that_cannot_fit_is_refused_with_the_reason(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    from extraction_pipeline.core.pdf.model import ParsedDocument

    template = BASE_TEMPLATES[RCT_BASE]
    llm = LLMConfig(model="openai/fake-model", api_base=fake_llm.api_base, api_key="sk-x", context_tokens=6_000)
    with pytest.raises(PermanentError, match="page 2 alone needs about"):
        plan_parts(template, ParsedDocument("x", ["short", "word " * 20_000]), llm)
    with pytest.raises(PermanentError, match=r"parts of 6000 .* more than the 12 allowed"):
        plan_parts(template, ParsedDocument("x", ["word " * 1_500] * 40), llm)
    assert plan_parts(template, ParsedDocument("x", ["short"]), llm) is None  # fits: one call


def test_merging_keeps_the_best_answer_and_joins_the_same_outcome() -> None:
    def entry(module: str, index: int | None, field: str, value: str | int | None, status: str) -> GroundedValue:
        return GroundedValue(module, index, field, value, "q", GroundingStatus(status), 1.0, "")

    first = {
        "metadata.nct_number": entry("metadata", None, "nct_number", None, "not reported"),
        "metadata.randomized_n": entry("metadata", None, "randomized_n", 1198, "approximate"),
        "outcomes.1.outcome_name": entry("outcomes", 1, "outcome_name", "Mortality", "verified"),
        "outcomes.1.timepoint": entry("outcomes", 1, "timepoint", "52 weeks", "verified"),
        "outcomes.1.events_treatment": entry("outcomes", 1, "events_treatment", None, "not reported"),
    }
    second = {
        "metadata.nct_number": entry("metadata", None, "nct_number", "NCT04412345", "verified"),
        "metadata.randomized_n": entry("metadata", None, "randomized_n", 1198, "verified"),
        "outcomes.1.outcome_name": entry("outcomes", 1, "outcome_name", "mortality", "verified"),
        "outcomes.1.timepoint": entry("outcomes", 1, "timepoint", "52 Weeks", "verified"),
        "outcomes.1.events_treatment": entry("outcomes", 1, "events_treatment", 41, "verified"),
        "outcomes.2.outcome_name": entry("outcomes", 2, "outcome_name", "Mortality", "verified"),
        "outcomes.2.timepoint": entry("outcomes", 2, "timepoint", "12 weeks", "verified"),
    }
    merged = merge_parts([first, second])
    assert merged["metadata.nct_number"].value == "NCT04412345"
    assert merged["metadata.randomized_n"].status == "verified"
    assert merged["outcomes.1.events_treatment"].value == 41 and merged["outcomes.1.events_treatment"].index == 1
    assert merged["outcomes.2.timepoint"].value == "12 weeks"  # another timepoint: another outcome
    assert "outcomes.3.outcome_name" not in merged


def test_merging_parts_in_arms_joins_an_arm_by_name_and_keeps_arms_and_comparisons_apart() -> None:
    def entry(module: str, index: int, field: str, value: str | int | None, status: str = "verified") -> GroundedValue:
        return GroundedValue(module, index, field, value, "q", GroundingStatus(status), 1.0, "")

    def fields(module: str, index: int, **values: str | int | None) -> dict[str, GroundedValue]:
        return {f"{module}.{index}.{name}": entry(module, index, name, value) for name, value in values.items()}

    first = {
        **fields("arms", 1, arm_name="Haloperidol 1 mg", randomized_n=None),
        **fields("arms", 2, arm_name="Placebo"),
        **fields("outcomes", 1, outcome_name="Nausea", arm="Haloperidol 1 mg", events=5),
        **fields("comparisons", 1, outcome_name="Nausea", arm="Haloperidol 1 mg", comparator_arm="Placebo"),
    }
    second = {
        **fields("arms", 1, arm_name="placebo"),
        **fields("arms", 2, arm_name="haloperidol 1 mg", randomized_n=40),
        **fields("arms", 3, arm_name="Haloperidol 2 mg", randomized_n=41),
        **fields("outcomes", 1, outcome_name="nausea", arm="haloperidol 1 mg", total=40),
        **fields("outcomes", 2, outcome_name="Nausea", arm="Haloperidol 2 mg", events=9, total=41),
        **fields("comparisons", 1, outcome_name="Nausea", arm="Haloperidol 2 mg", comparator_arm="Placebo"),
    }
    merged = merge_parts([first, second])
    assert [merged[f"arms.{n}.arm_name"].value for n in (1, 2, 3)] == [
        "Haloperidol 1 mg",
        "Placebo",
        "Haloperidol 2 mg",
    ]
    assert merged["arms.1.randomized_n"].value == 40 and "arms.4.arm_name" not in merged
    assert (merged["outcomes.1.events"].value, merged["outcomes.1.total"].value) == (5, 40)  # one arm, joined
    assert (merged["outcomes.2.arm"].value, merged["outcomes.2.events"].value) == ("Haloperidol 2 mg", 9)
    assert [merged[f"comparisons.{n}.arm"].value for n in (1, 2)] == ["Haloperidol 1 mg", "Haloperidol 2 mg"]
