"""Signs, units and interrupted quotes in grounding, on PDFs made with PyMuPDF (real text
extraction, with a font that has the true minus sign and superscripts) and on the real corpus.
None of it may be bought by verifying a forgery."""

from __future__ import annotations

from pathlib import Path

import pytest

from extraction_pipeline.core.pdf.engine import EngineOptions, parse_pdf
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.verification.grounding import UNVERIFIED, VERIFIED, Grounder
from extraction_pipeline_tests.support import pdf_samples

CORPUS = pdf_samples.CORPUS


def _pdf(tmp_path: Path, pages: list[list[str]]) -> Grounder:
    """A PDF whose pages hold these lines, written with a Unicode font; parsed by the real engine."""
    import pymupdf

    path = tmp_path / "synthetic.pdf"
    font = pymupdf.Font("cjk")  # PyMuPDF's built-in universal font: has U+2212 and superscripts
    with pymupdf.open() as doc:
        for lines in pages:
            page = doc.new_page(width=595, height=842)
            writer = pymupdf.TextWriter(page.rect)
            for number, line in enumerate(lines):
                writer.append((56, 72 + 16 * number), line, font=font, fontsize=10)
            writer.write_text(page)
        doc.save(path)
    parsed = parse_pdf(path, EngineOptions(table_detection="off"))
    return Grounder(ParsedDocument("synthetic", parsed["pages_text"]))


TABLE_LINES = [
    "Table 2. Change from baseline at 26 weeks",
    "Outcome  Drug (n = 88)  Placebo (n = 90)",
    "HbA1c",
    "\u22121.42 (\u22122.10; \u22120.75) 88 \u22120.97 (\u22121.53; \u22120.41) 90",
    "the test statistic was\u22122.41 overall (p = 0.02).",
    "Mean BMI was 31.4 kg m\u22122 and 30.9 kg\u00b7m\u22122; dose 0.5 mg\u00b7kg\u22121 daily; BSA 1.73 m\u00b2.",
]


@pytest.fixture
def grounder(tmp_path: Path) -> Grounder:
    return _pdf(tmp_path, [TABLE_LINES])


def test_a_quote_starting_with_a_negative_number_takes_in_its_sign(grounder: Grounder) -> None:
    row = "\u22121.42 (\u22122.10; \u22120.75) 88 \u22120.97 (\u22121.53; \u22120.41) 90"
    verdict = grounder.ground(-1.42, row)
    assert verdict.status == VERIFIED, verdict.reason
    assert grounder.ground(-1.42, "-1.42 (-2.10; -0.75) 88").status == VERIFIED  # ASCII minus in the quote
    dropped = grounder.ground(1.42, "1.42 (\u22122.10; \u22120.75) 88")
    assert dropped.status == UNVERIFIED and "1.42" in dropped.reason


def test_a_minus_glued_to_the_word_before_still_signs_the_number(grounder: Grounder) -> None:
    assert grounder.ground(-2.41, "the test statistic was \u22122.41 overall").status == VERIFIED
    assert grounder.ground(-2.41, "the test statistic was -2.41 overall").status == VERIFIED
    forged = grounder.ground(2.41, "the test statistic was 2.41 overall")
    assert forged.status == UNVERIFIED and "2.41" in forged.reason


@pytest.mark.parametrize(
    "quote",
    [
        "Mean BMI was 31.4 kg/m2 and 30.9 kg/m2",
        "Mean BMI was 31.4 kg/m\u00b2 and 30.9 kg/m\u00b2",
        "Mean BMI was 31.4 kg m-2 and 30.9 kg m -2",
        "Mean BMI was 31.4 kg m\u22122 and 30.9 kg\u00b7m\u22122; dose 0.5 mg/kg daily",
        "dose 0.5 mg\u00b7kg\u22121 daily; BSA 1.73 m2",
    ],
)
def test_unit_exponents_are_part_of_the_unit(grounder: Grounder, quote: str) -> None:
    value = 31.4 if "31.4" in quote else 0.5
    assert grounder.ground(value, quote).status == VERIFIED, grounder.ground(value, quote).reason


@pytest.mark.parametrize(
    "forged",
    [
        "Mean BMI was 31.5 kg/m2 and 30.9 kg/m2",  # a digit changed
        "Mean BMI was 30.9 kg/m2 and 31.4 kg/m2",  # numbers swapped
        "Mean BMI was 3.14 kg/m2 and 30.9 kg/m2",  # decimal point moved
        "dose 5 mg\u00b7kg\u22121 daily",  # decimal point dropped
    ],
)
def test_unit_handling_never_verifies_a_forged_number(grounder: Grounder, forged: str) -> None:
    assert grounder.ground(None, forged).status == UNVERIFIED


PAGE_ONE = [
    "Results",
    "The primary outcome occurred in 12 of 100 patients in the",
    "",
    "Journal of Clinical Trials 2021; 14: 233\u2013245                        7",
]
PAGE_TWO = [
    "Smith et al.                                    Randomized trial of drug X",
    "Figure 2. Kaplan\u2013Meier estimates of the primary outcome over 52 weeks.",
    "drug group and in 20 of 98 patients in the placebo group (risk ratio 0.59;",
    "95% CI 0.31 to 1.12).",
]


def test_a_quote_interrupted_by_a_page_break_is_found_on_both_pages(tmp_path: Path) -> None:
    grounder = _pdf(tmp_path, [PAGE_ONE, PAGE_TWO])
    quote = (
        "The primary outcome occurred in 12 of 100 patients in the drug group and in 20 of 98 patients "
        "in the placebo group (risk ratio 0.59; 95% CI 0.31 to 1.12)."
    )
    verdict = grounder.ground(20, quote)
    assert verdict.status == VERIFIED, verdict.reason
    assert verdict.page == 1 and verdict.continued is not None and verdict.continued["page"] == 2
    assert "pages 1 and 2" in verdict.reason
    second = grounder.parsed.pages_text[1][verdict.continued["start"] : verdict.continued["end"]]
    assert second.startswith("drug group") and second.endswith("1.12")
    for forged in (
        quote.replace("20 of 98", "21 of 98"),
        quote.replace("12 of 100", "12 of 101"),
        quote.replace("0.59", "0.95"),
    ):
        assert grounder.ground(None, forged).status == UNVERIFIED, forged


def _corpus_grounder(pmcid: str) -> Grounder:
    from extraction_pipeline.core.pdf.isolation import run_isolated

    result = run_isolated(CORPUS / "pdf" / f"{pmcid}.pdf", timeout_seconds=300, limits=EngineOptions())
    return Grounder(ParsedDocument(pmcid, result["pages_text"], [ParsedTable(**t) for t in result["tables"]]))


needs_corpus = pytest.mark.skipif(
    not (CORPUS / "pdf").is_dir(), reason="the trial corpus is absent (EXTRACTION_CORPUS)"
)


def test_judgements_get_their_own_status_never_verified(grounder: Grounder) -> None:
    from extraction_pipeline.core.verification.grounding import (
        JUDGEMENT_NOT_FOUND,
        JUDGEMENT_SUPPORTED,
        JUDGEMENT_UNSUPPORTED,
    )

    supported = grounder.ground("low", "the test statistic was \u22122.41 overall", judgement=True)
    assert supported.status == JUDGEMENT_SUPPORTED and "review it" in supported.reason
    missing = grounder.ground("low", "allocation was concealed by sealed envelopes", judgement=True)
    assert missing.status == JUDGEMENT_NOT_FOUND
    wrong_number = grounder.ground("high", "the test statistic was \u22122.99 overall", judgement=True)
    assert wrong_number.status == JUDGEMENT_UNSUPPORTED
    assert grounder.ground(None, None, judgement=True).status == "not reported"


@needs_corpus
@pytest.mark.parametrize(
    ("pmcid", "row", "value"),
    [
        ("3654355", "\u22125.6 (\u22126.2, \u22125.1)", -5.6),  # a table row printed with U+2212
        ("4319071", "\u22120.71 (\u22121.06, \u22120.37)", -0.71),  # the PDF prints en dashes as minus signs
        ("5614421", "\u221256.3 (\u2212174.9 to 62.4)", -56.3),
    ],
)
def test_corpus_rows_starting_with_a_negative_number(pmcid: str, row: str, value: float) -> None:
    grounder = _corpus_grounder(pmcid)
    assert grounder.ground(value, row).status == VERIFIED, grounder.ground(value, row).reason
    unsigned = row.replace("\u2212", "", 1)
    assert grounder.ground(-value, unsigned).status == UNVERIFIED


@needs_corpus
@pytest.mark.parametrize("unit", ["kg/m2", "kg/m\u00b2", "kg m\u22122", "kg\u00b7m\u22122", "kg m-2"])
def test_corpus_unit_exponents_written_another_way(unit: str) -> None:
    grounder = _corpus_grounder("4486927")  # the PDF prints "26.3–26.7 kg/m2" (superscript lost)
    quote = f"They were slim with an average BMI of 26.3-26.7 {unit}."
    assert grounder.ground(26.7, quote).status == VERIFIED, grounder.ground(26.7, quote).reason
    for forged in (quote.replace("26.7", "26.8"), quote.replace("26.3-26.7", "26.7-26.3")):
        assert grounder.ground(None, forged).status == UNVERIFIED, forged


# The sentence as PubMed Central prints it; the PDF breaks it across pages 4 and 5, with a figure
# caption, the journal's running header and a page number in between.
PAGE_BREAK_SENTENCE = (
    "The mean (\u00b1 SD) daily dose of placebo at endpoint was 12.8 \u00b1 3.6 mg and the prescription pattern "
    "of the last dose of placebo corresponding to aripiprazole (n = 45) was distributed as follows"
)


@needs_corpus
def test_corpus_sentence_across_a_page_break() -> None:
    text = (CORPUS / "pmc_text" / "PMC5617873.txt").read_text(errors="replace").replace("\n", " ")
    assert PAGE_BREAK_SENTENCE in text
    grounder = _corpus_grounder("5617873")
    verdict = grounder.ground(12.8, PAGE_BREAK_SENTENCE)
    assert verdict.status == VERIFIED, verdict.reason
    assert verdict.continued is not None and (verdict.page, verdict.continued["page"]) == (4, 5)
    for forged in (PAGE_BREAK_SENTENCE.replace("12.8", "12.9"), PAGE_BREAK_SENTENCE.replace("n = 45", "n = 46")):
        assert grounder.ground(None, forged).status == UNVERIFIED, forged
