"""An answer's text validated into the template's output model (a fenced ```json block is read
too): for an ordinary call's answer, a batch's, and an answer stored earlier."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel

from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.schema import output_model

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_answer(content: str | None, template: TemplateDefinition) -> BaseModel:
    """The answer text validated into the template's output model. Raises ValueError (empty, not
    JSON) or pydantic's ValidationError (JSON, but not the template's shape)."""
    if not content:
        raise ValueError("empty response")
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content
    return output_model(template).model_validate(json.loads(text))
