"""`evaluate`: gold tables read (corpus JSON, CSV with a mapping), outcomes matched across
different names, fields scored, the wrong ones listed; and the oracle batch of the real corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction_pipeline.core.evaluation.gold import read_gold
from extraction_pipeline.core.evaluation.matching import name_score
from extraction_pipeline.core.evaluation.score import evaluate
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.documents import insert_document
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.usage import Usage
from extraction_pipeline_tests.support.cli import run_cli
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply
from extraction_pipeline_tests.support.oracle import CORPUS, ORACLE_PAPERS


@pytest.mark.parametrize(
    ("gold", "extracted", "match"),
    [
        ("HbA1c at 12 weeks", "glycated haemoglobin", True),
        ("BMI", "body mass index", True),
        ("Systolic blood pressure at 6 months", "SBP", True),
        ("mortality at 28 days", "28-day mortality", True),
        ("mortality", "glycated haemoglobin", False),
        ("length of hospital stay", "quality of life", False),
    ],
)
def test_outcome_names_are_compared_after_normalizing(gold: str, extracted: str, match: bool) -> None:
    assert (name_score(gold, extracted) >= 70) is match, name_score(gold, extracted)


def _entry(index: int, field: str, value: object, quote: str = "q") -> tuple[str, dict[str, object]]:
    return f"outcomes.{index}.{field}", {
        "module": "outcomes",
        "index": index,
        "field": field,
        "value": value,
        "quote": quote,
    }


def _batch(ledger: Ledger) -> int:
    doc, _ = insert_document(
        ledger, project="p", filename="smith2020.pdf", sha256="a" * 64, size_bytes=1, pages=1, stored_path="/x"
    )
    batch = create_batch(ledger, idempotency_key="e", project="p", user="u", document_ids=[doc]).id
    fields = dict(
        [
            _entry(1, "outcome_name", "glycated haemoglobin"),
            _entry(1, "mean_treatment", 7.1),
            _entry(1, "sd_treatment", 1.2),
            _entry(1, "mean_control", 7.9, "HbA1c was 7.6 (1.1) with placebo"),  # gold says 7.6
            _entry(2, "outcome_name", "death from any cause"),
            _entry(2, "events_treatment", 12),
            _entry(2, "total_treatment", 100),
            ("metadata.randomized_n", {"module": "metadata", "index": None, "field": "randomized_n", "value": 200}),
            ("risk_of_bias.overall", {"module": "risk_of_bias", "index": None, "field": "overall", "value": None}),
        ]
    )
    states.claim(ledger, 1, run_id="r", worker="w")
    states.complete(ledger, 1, run_id="r", result={"fields": fields}, usage=Usage("openai/x"))
    return batch


GOLD_CSV = """Study ID,Outcome,Type,Mean (I),SD (I),Mean (C),SD (C),Events (I),N (I),Events (C),N (C)
smith2020,HbA1c at 12 weeks,continuous,7.1,1.2,7.6,1.1,,,,
smith2020,All-cause mortality,binary,,,,,12,100,15,98
jones2019,BMI,continuous,31.0,NR,30.2,x,,,,
"""
MAPPING = {
    "study": "Study ID",
    "outcome": "Outcome",
    "outcome_type": "Type",
    "columns": {
        "mean_treatment": "Mean (I)",
        "sd_treatment": "SD (I)",
        "mean_control": "Mean (C)",
        "sd_control": "SD (C)",
        "events_treatment": "Events (I)",
        "total_treatment": "N (I)",
        "events_control": "Events (C)",
        "total_control": "N (C)",
    },
}


def test_a_batch_scored_against_the_users_own_sheet(ledger: Ledger, tmp_path: Path) -> None:
    batch = _batch(ledger)
    gold_path = tmp_path / "gold.csv"
    gold_path.write_text(GOLD_CSV)
    result = evaluate(ledger, batch, read_gold(gold_path, MAPPING))
    scores = {name: (s.gold, s.found, s.right, s.wrong, s.missing) for name, s in result.fields.items() if s.gold}
    assert scores == {
        "mean_treatment": (1, 1, 1, 0, 0),
        "sd_treatment": (1, 1, 1, 0, 0),
        "mean_control": (1, 1, 0, 1, 0),
        "sd_control": (1, 0, 0, 0, 1),
        "events_treatment": (1, 1, 1, 0, 0),
        "total_treatment": (1, 1, 1, 0, 0),
        "events_control": (1, 0, 0, 0, 1),
        "total_control": (1, 0, 0, 0, 1),
    }
    [wrong] = result.wrong
    assert (wrong["document"], wrong["outcome"], wrong["gold"], wrong["extracted"]) == (
        "smith2020.pdf",
        "HbA1c at 12 weeks",
        7.6,
        7.9,
    )
    assert wrong["quote"] == "HbA1c was 7.6 (1.1) with placebo"
    hba1c, mortality = (m for _doc, m in result.matches)
    assert hba1c.extracted is not None and hba1c.extracted.name == "glycated haemoglobin" and hba1c.name_score >= 70
    assert mortality.extracted is not None and mortality.extracted.index == 2  # carried by two equal numbers
    assert "2 equal value(s)" in mortality.why
    assert result.studies_not_in_batch == ["jones2019"]


def test_precision_and_recall_per_field_group_and_no_gold_where_the_sheet_has_none(
    ledger: Ledger, tmp_path: Path
) -> None:
    batch = _batch(ledger)
    gold_path = tmp_path / "gold.csv"
    gold_path.write_text(GOLD_CSV)
    groups = evaluate(ledger, batch, read_gold(gold_path, MAPPING)).groups()
    assert list(groups) == ["study", "baseline", "outcome numbers", "RoB"]
    numbers = groups["outcome numbers"]
    # 8 gold values; 5 extracted where gold has a value, 4 of them right (mean_control is wrong)
    assert (numbers.gold, numbers.extracted, numbers.right) == (8, 5, 4)
    assert numbers.precision == 4 / 5 and numbers.recall == 4 / 8
    study = groups["study"]
    assert (study.gold, study.extracted, study.precision, study.recall) == (0, 1, None, None)  # randomized_n
    assert groups["RoB"].extracted == 0  # a judgement left empty is no value
    assert groups["baseline"].as_dict() == {
        "gold": 0,
        "extracted": 0,
        "right": 0,
        "precision": None,
        "recall": None,
        "note": "no gold values",
    }


def test_evaluate_command_prints_the_table_and_refuses_bad_input(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    batch = _batch(Ledger.connect(settings.ledger_url))
    (tmp_path / "gold.csv").write_text(GOLD_CSV)
    (tmp_path / "mapping.json").write_text(json.dumps(MAPPING))
    args = ["evaluate", str(batch), "--gold", str(tmp_path / "gold.csv"), "--mapping", str(tmp_path / "mapping.json")]
    shown = run_cli(settings.home_dir, *args, check=True).stdout
    assert "total                   8      5      4      1        3" in shown
    assert "'HbA1c at 12 weeks' -> extracted #1 'glycated haemoglobin'" in shown
    assert "mean_control: gold 7.6, extracted 7.9" in shown and "study jones2019: no document" in shown
    assert "outcome numbers         8         5      4       80%    50%" in shown
    assert "study              no gold values (1 extracted)" in shown and "RoB                no gold values" in shown
    as_json = json.loads(run_cli(settings.home_dir, *args, "--json", check=True).stdout)
    assert as_json["total"] == {"gold": 8, "found": 5, "right": 4, "wrong": 1, "missing": 3}
    assert as_json["groups"]["outcome numbers"] == {
        "gold": 8,
        "extracted": 5,
        "right": 4,
        "precision": 0.8,
        "recall": 0.5,
    }
    assert as_json["groups"]["baseline"]["note"] == "no gold values"
    (tmp_path / "bad.csv").write_text("Study ID,Outcome,Type,Mean (I)\nsmith2020,HbA1c,continuous,seven\n")
    bad = run_cli(
        settings.home_dir,
        "evaluate",
        str(batch),
        "--gold",
        str(tmp_path / "bad.csv"),
        "--mapping",
        str(tmp_path / "mapping.json"),
    )
    assert bad.returncode == 2 and "gold row 1, Mean (I): 'seven' is not a number" in bad.stderr
    no_mapping = run_cli(settings.home_dir, "evaluate", str(batch), "--gold", str(tmp_path / "gold.csv"))
    assert no_mapping.returncode == 2 and "give --mapping" in no_mapping.stderr
    unknown = run_cli(settings.home_dir, "evaluate", "99", "--gold", str(tmp_path / "gold.csv"))
    assert unknown.returncode == 2 and "unknown batch 99" in unknown.stderr


@pytest.mark.skipif(not (CORPUS / "pdf").is_dir(), reason="the trial corpus is absent (EXTRACTION_CORPUS)")
def test_the_oracle_batch_of_the_corpus_scores_every_printed_gold_value_right(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    from extraction_pipeline.core.extraction.extract import extract_item
    from extraction_pipeline.core.extraction.prompts import document_from_messages
    from extraction_pipeline.core.ledger.queries import batch_item_rows
    from extraction_pipeline.core.llm.gateway import LLMConfig
    from extraction_pipeline.core.pdf.parsing import parse_document
    from extraction_pipeline.core.pdf.registration import register_pdf
    from extraction_pipeline_tests.support.oracle import build_answer, skeleton

    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    oracles = {pmcid: build_answer(pmcid) for pmcid in ORACLE_PAPERS}

    def answer(messages: list[dict[str, str]]) -> Reply:
        document = skeleton(document_from_messages(messages))
        oracle = next(o for o in oracles.values() if skeleton(o.fingerprint) in document)
        return Reply(oracle.as_json(), tokens_in=9000, tokens_out=900)

    fake_llm.answer = answer
    docs = [register_pdf(ledger, settings.documents_dir, "oracle", CORPUS / "pdf" / f"{p}.pdf") for p in ORACLE_PAPERS]
    batch = create_batch(
        ledger, idempotency_key="oracle", project="oracle", user="u", document_ids=[d.id for d in docs]
    ).id
    llm = LLMConfig(model="openai/oracle", api_base=fake_llm.api_base, api_key="sk-test-not-a-secret")
    for item in batch_item_rows(ledger, batch):
        parsed = parse_document(ledger, sha256=item["sha256"], stored_path=item["stored_path"])
        outcome = extract_item(ledger, item_id=item["id"], run_id="r", worker="w", parsed=parsed, llm=llm)
        assert outcome.status == "completed", outcome.reason
    result = evaluate(ledger, batch, read_gold(CORPUS / "gold_outcomes.json"))
    printed = sum(len(o.gold) for o in oracles.values())
    total = result.total()
    assert total.right == printed and total.wrong == 0 and total.found == printed  # every printed value, right
    assert total.missing == total.gold - printed  # the rest are derived by the annotators or only in figures
    gold_studies = {str(row["pmcid"]) for row in json.loads((CORPUS / "gold_outcomes.json").read_text())}
    assert sorted(result.studies_not_in_batch) == sorted(gold_studies - set(ORACLE_PAPERS))
    report = run_cli(
        settings.home_dir, "evaluate", str(batch), "--gold", str(CORPUS / "gold_outcomes.json"), check=True
    )
    print(report.stdout)  # the table of record (pytest -s shows it)
