"""Reassigning numbers to another arm: a reviewer's correction of an arm reference.

In a template with arms (RCT version 2) an outcome entry names the arm its numbers belong to
(``outcomes.N.arm``) and a comparison names its two sides (``comparisons.N.arm`` /
``comparator_arm``). A reviewer who sees numbers under the wrong arm corrects that reference like
any other value — an append-only decision — but only to an arm the study declares: a free-text
name would detach the numbers from every arm. The study's arms are read with the reviewer's
decisions applied, so an arm renamed in review is offered by its new name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.extraction.grounded import GroundedValue, fields_of
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.items import get_item
from extraction_pipeline.core.review.decisions import current_decisions
from extraction_pipeline.core.review.values import Decision, final_value
from extraction_pipeline.core.templates.arms import Arm, arm_key_of, has_arms, study_arms
from extraction_pipeline.core.templates.definition import TemplateDefinition

# (module, field) of the fields that name a declared arm.
ARM_REFERENCES = frozenset({("outcomes", "arm"), ("comparisons", "arm"), ("comparisons", "comparator_arm")})


def is_arm_reference(definition: TemplateDefinition, path: str) -> bool:
    parts = path.split(".")
    return len(parts) == 3 and (parts[0], parts[2]) in ARM_REFERENCES and has_arms(definition)


def declared_arms(fields: Mapping[str, GroundedValue], decided: Mapping[str, Decision]) -> tuple[Arm, ...]:
    """The arms a document declares, named by their final values (``decided``: by path)."""
    view = study_arms(list(fields), lambda path: final_value(fields.get(path), decided.get(path)))
    return view.arms if view.version == 2 else ()


def item_arms(ledger: Ledger, item_id: int) -> tuple[Arm, ...]:
    item = get_item(ledger, item_id)
    if item is None:
        raise ConfigError(f"unknown item {item_id}")
    fields = fields_of(json.loads(item["result_json"]) if item["result_json"] else None)
    decided = {
        path: d for (item_key, path), d in current_decisions(ledger, item["batch_id"]).items() if item_key == item_id
    }
    return declared_arms(fields, decided)


def resolve_arm(arms: tuple[Arm, ...], text: str) -> str:
    """The declared arm's name ``text`` names (case, spacing and punctuation aside); a clear error
    listing the study's arms when it names none."""
    wanted = arm_key_of(text)
    for arm in arms:
        if wanted and wanted in (arm_key_of(arm.name), arm_key_of(arm.label)):
            return arm.name
    if not arms:
        raise ConfigError("this study declares no arms: declare the arm (correct its arm_name) first")
    names = ", ".join(repr(arm.name) for arm in arms)
    raise ConfigError(f"{text.strip()!r} is not an arm of this study: choose one of {names}")
