"""What we extract in this first cut, and the shape the LLM must answer in.

Every field is a (value, quote) pair: a value without a verbatim quote cannot be verified and is
shown as such. The full trial template (baseline per arm, RoB 2.0, outcomes) builds on this shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: str  # "text" | "integer" | "number"
    instruction: str


FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("nct_number", "text", "ClinicalTrials.gov registration number (NCT followed by 8 digits)"),
    FieldSpec("randomized_n", "integer", "total number of participants randomized"),
    FieldSpec("effect_measure", "text", "primary effect measure: HR, OR or RR"),
    FieldSpec("effect_estimate", "number", "point estimate of the primary effect measure"),
    FieldSpec("ci_lower", "number", "lower bound of its 95% confidence interval"),
    FieldSpec("ci_upper", "number", "upper bound of its 95% confidence interval"),
)
FIELD_NAMES: tuple[str, ...] = tuple(spec.name for spec in FIELDS)


class ExtractedField(BaseModel):
    model_config = ConfigDict(extra="ignore")

    value: str | float | int | None = None
    quote: str | None = Field(default=None, description="verbatim sentence from the document")


class ExtractionOutput(BaseModel):
    """The JSON object the model must return."""

    model_config = ConfigDict(extra="ignore")

    fields: dict[str, ExtractedField]


def output_json_schema() -> dict[str, Any]:
    field_schema = ExtractedField.model_json_schema()
    return {
        "type": "object",
        "properties": {
            "fields": {
                "type": "object",
                "properties": {name: field_schema for name in FIELD_NAMES},
            }
        },
        "required": ["fields"],
    }
