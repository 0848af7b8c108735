"""The forest plot drawn as RevMan draws it: each study's arm numbers beside it, a study with no
events in either arm shown as not estimable, the sides' totals, "Favours …" from the sides' names.

The plots are read back from their SVG (text stays text), as the batch page shows them."""

from __future__ import annotations

from extraction_pipeline.core.export.meta_csv import COLUMNS
from extraction_pipeline.core.synthesis.batch import OutcomeSynthesis, outcome_synthesis
from extraction_pipeline.core.synthesis.comparisons import ComparisonSides
from extraction_pipeline.core.synthesis.csv_input import EVENTS, ArmNumbers, parse_meta_csv
from extraction_pipeline.core.synthesis.figures import svg_text
from extraction_pipeline.core.synthesis.forest import forest_figure
from extraction_pipeline_tests.support.svg import classed, parse, texts, titles


def _csv(rows: list[dict[str, object]]) -> str:
    lines = [",".join(COLUMNS)] + [",".join(str(row.get(column, "")) for column in COLUMNS) for row in rows]
    return "\n".join(lines) + "\n"


def _study(study: str, document: int, name: str, arms: list[tuple[str, dict[str, object]]]) -> list[dict[str, object]]:
    """One study's rows of one outcome, an arm per row (the version-2 CSV: arm id and name)."""
    base = {"study": study, "document_id": document, "outcome": 1, "outcome_name": name}
    return [{**base, "arm": f"arms.{index}", "group": arm, **numbers} for index, (arm, numbers) in enumerate(arms, 1)]


def _outcomes(text: str, comparison: ComparisonSides | None = None) -> list[OutcomeSynthesis]:
    data = parse_meta_csv(text, strict=False, comparison=comparison)
    return [outcome_synthesis(group) for group in data.groups]


def _drawn(outcome: OutcomeSynthesis) -> list[str]:
    return texts(parse(svg_text(forest_figure(outcome))))


def _in_order(drawn: list[str], expected: list[str]) -> bool:
    """``expected`` appears in ``drawn`` as one run of consecutive texts."""
    return any(drawn[at : at + len(expected)] == expected for at in range(len(drawn)))


EVENTS_CSV = _csv(
    _study("Adams 2018", 1, "vomiting", [("ondansetron", {"xi": 0, "ni": 38}), ("placebo", {"xi": 0, "ni": 39})])
    + _study("Baker 2019", 2, "vomiting", [("ondansetron", {"xi": 4, "ni": 40}), ("Placebo", {"xi": 9, "ni": 41})])
    + _study("Clark 2020", 3, "vomiting", [("Ondansetron", {"xi": 6, "ni": 50}), ("placebo", {"xi": 11, "ni": 50})])
)


def test_each_study_shows_its_arms_events_and_totals_and_the_double_zero_one_is_not_estimable() -> None:
    [outcome] = _outcomes(EVENTS_CSV)
    assert [row.effect.study for row in outcome.rows] == ["Baker 2019", "Clark 2020"]
    [adams] = outcome.not_estimable
    assert adams.arms == ArmNumbers(EVENTS, (0, 38), (0, 39)) and adams.sides == ("ondansetron", "placebo")
    assert outcome.result.k == 2  # drawn, never pooled
    drawn = _drawn(outcome)
    # The sides named once over their columns (the arms agree on their names, whatever the case).
    assert _in_order(drawn, ["Study", "ondansetron", "placebo", "Events", "Total", "Events", "Total"])
    assert _in_order(drawn, ["Baker 2019", "4", "40", "9", "41"])
    assert _in_order(drawn, ["Clark 2020", "6", "50", "11", "50"])
    assert _in_order(drawn, ["Adams 2018", "0", "38", "0", "39", "Not estimable"])
    studies = [text for text in drawn if text.endswith(("2018", "2019", "2020"))]
    assert studies == ["Adams 2018", "Baker 2019", "Clark 2020"]  # in the file's order, as RevMan keeps it
    assert "Adams 2018: no events in either arm, not pooled" in titles(parse(svg_text(forest_figure(outcome))))
    # RevMan's totals: participants on the pooled line (the not-estimable study's too), events below.
    assert _in_order(drawn, ["Common effect", "128", "130"])
    assert _in_order(drawn, ["Total events", "10", "20"])
    assert "Favours ondansetron" in drawn and "Favours placebo" in drawn


def test_means_show_mean_sd_and_total_of_each_side() -> None:
    text = _csv(
        _study(
            "Smith 2020",
            1,
            "HbA1c",
            [("metformin", {"mi": 7.1, "sdi": 1.0, "ni": 50}), ("placebo", {"mi": 7.6, "sdi": 1.2, "ni": 48})],
        )
        + _study(
            "Jones 2021",
            2,
            "HbA1c",
            [("metformin", {"mi": 7.05, "sdi": 0.9, "ni": 40}), ("placebo", {"mi": 7.4, "sdi": 1.1, "ni": 42})],
        )
    )
    [outcome] = _outcomes(text)
    drawn = _drawn(outcome)
    assert _in_order(drawn, ["Mean", "SD", "Total", "Mean", "SD", "Total"])
    assert _in_order(drawn, ["Jones 2021", "7.05", "0.9", "40", "7.4", "1.1", "42"])
    assert _in_order(drawn, ["Common effect", "90", "90"])
    assert "Total events" not in drawn  # means have no events


def test_favours_labels_come_from_a_named_comparison_and_fall_back_to_the_sides_roles() -> None:
    text = _csv(
        _study("Adams 2018", 1, "pain", [("Drug A", {"xi": 3, "ni": 30}), ("Saline", {"xi": 9, "ni": 30})])
        + _study("Baker 2019", 2, "pain", [("Drug B", {"xi": 5, "ni": 40}), ("Sham", {"xi": 8, "ni": 40})])
    )
    [proposed] = _outcomes(text)
    drawn = _drawn(proposed)
    # The studies disagree on both sides' names: the sides are said by their roles.
    assert "Favours intervention" in drawn and "Favours comparator" in drawn
    [named] = _outcomes(text, ComparisonSides("active drug versus inactive control"))
    drawn = _drawn(named)
    assert "Favours active drug" in drawn and "Favours inactive control" in drawn
    assert len(classed(parse(svg_text(forest_figure(named))), "favours")) == 2
    # Named the other way round, the comparator first: each name stays with its arms' side (the
    # intervention on the left), never "Favours saline" over the drugs' side.
    [turned] = _outcomes(text, ComparisonSides("saline or sham vs drug"))
    drawn = _drawn(turned)
    assert drawn.index("Favours drug") < drawn.index("Favours saline or sham")


def test_a_study_with_only_a_printed_estimate_has_no_arm_numbers_and_no_totals_are_summed() -> None:
    printed = {
        "study": "Lee 2019",
        "document_id": 4,
        "outcome": 1,
        "outcome_name": "vomiting",
        "arm": "arms.1",
        "group": "ondansetron",
        "comparison": "ondansetron vs placebo",
        "comparator_arm": "arms.2",
        "comparator": "placebo",
        "measure": "RR",
        "estimate": 0.6,
        "ci.lb": 0.4,
        "ci.ub": 0.9,
    }
    arms = _study("Lee 2019", 4, "vomiting", [("ondansetron", {}), ("placebo", {})])
    [outcome] = _outcomes(EVENTS_CSV[:-1] + "\n" + _csv([*arms, printed]).split("\n", 1)[1])
    assert [row.effect.study for row in outcome.rows] == ["Baker 2019", "Clark 2020", "Lee 2019"]
    assert outcome.rows[-1].arms is None and outcome.rows[-1].sides == ("ondansetron", "placebo")
    drawn = _drawn(outcome)
    assert _in_order(drawn, ["Lee 2019", "0.60 [0.40, 0.90]"])
    assert not any(text == "Total events" for text in drawn)  # a total of some studies would mislead
