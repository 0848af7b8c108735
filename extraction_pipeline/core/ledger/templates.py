"""Template versions per project: immutable rows; an edit inserts the next version.

A batch stores the id of the version current when it was created, so editing a project's
template never changes how an existing batch extracts or what its results mean.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import batch_items, batches, templates
from extraction_pipeline.core.templates.definition import (
    TemplateDefinition,
    parse_custom_fields,
    parse_instructions,
)
from extraction_pipeline.core.templates.rct import BASE_TEMPLATES, RCT_BASE, RCT_TEMPLATE

# Each round of a version-number race has one winner, so N concurrent editors need at most N
# attempts; the bound only stops a pathological loop.
_SAVE_ATTEMPTS = 100


@dataclass(frozen=True)
class TemplateVersion:
    id: int
    project: str
    version: int
    definition: TemplateDefinition
    created_at: datetime

    @property
    def label(self) -> str:
        return f"{self.project} v{self.version} ({self.definition.base} base v{self.definition.base_version})"


LEGACY_LABEL = "built-in rct base (batch created before template versions)"


def definition_of(frozen: TemplateVersion | None) -> TemplateDefinition:
    """What a batch extracts with: its frozen version, or the built-in base for a batch from a
    ledger older than templates."""
    return frozen.definition if frozen else RCT_TEMPLATE


def label_of(frozen: TemplateVersion | None) -> str:
    return frozen.label if frozen else LEGACY_LABEL


def _from_row(row: Any) -> TemplateVersion:
    definition = TemplateDefinition.from_stored(json.loads(row["definition_json"]))
    return TemplateVersion(row["id"], row["project"], row["version"], definition, row["created_at"])


def get_version(ledger: Ledger, template_id: int) -> TemplateVersion | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(templates).where(templates.c.id == template_id)).mappings().first()
    return _from_row(row) if row else None


def latest_version(ledger: Ledger, project: str) -> TemplateVersion | None:
    with ledger.engine.connect() as conn:
        row = (
            conn.execute(
                select(templates).where(templates.c.project == project).order_by(templates.c.version.desc()).limit(1)
            )
            .mappings()
            .first()
        )
    return _from_row(row) if row else None


def list_versions(ledger: Ledger, project: str) -> list[TemplateVersion]:
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            select(templates).where(templates.c.project == project).order_by(templates.c.version)
        ).mappings()
        return [_from_row(row) for row in rows]


def save_version(ledger: Ledger, project: str, definition: TemplateDefinition) -> tuple[TemplateVersion, bool]:
    """Make ``definition`` the project's current template. Returns (version, created): saving the
    definition that is already current creates nothing. Concurrent saves each get their own
    version number (the UNIQUE (project, version) constraint decides; the loser retries)."""
    for _ in range(_SAVE_ATTEMPTS):
        current = latest_version(ledger, project)
        if current is not None and current.definition.digest == definition.digest:
            return current, False
        next_version = (current.version if current else 0) + 1
        try:
            with ledger.engine.begin() as conn:
                new_id = conn.execute(
                    insert(templates)
                    .values(
                        project=project,
                        version=next_version,
                        base=definition.base,
                        digest=definition.digest,
                        definition_json=definition.canonical_json(),
                        created_at=utcnow(),
                    )
                    .returning(templates.c.id)
                ).scalar_one()
        except IntegrityError:
            time.sleep(random.uniform(0, 0.02))  # noqa: S311  (jitter, not security) another editor won: look again
            continue
        saved = get_version(ledger, new_id)
        assert saved is not None  # just inserted in a committed transaction
        return saved, True
    raise ConfigError(f"could not save a template version for project {project!r}: too many concurrent edits")


def current_template(ledger: Ledger, project: str) -> TemplateVersion:
    """The version a new batch of ``project`` freezes: the latest one; the built-in RCT base for a
    project that never set one (saved as its version 1); and when this release ships a newer base
    than the latest version was built on, that base with the project's own fields and rules
    (saved as the next version, so earlier batches keep theirs)."""
    latest = latest_version(ledger, project)
    if latest is None:
        return save_version(ledger, project, BASE_TEMPLATES[RCT_BASE])[0]
    base = BASE_TEMPLATES.get(latest.definition.base)
    if base is not None and latest.definition.base_version < base.base_version:
        rebased = replace(
            base, custom_fields=latest.definition.custom_fields, instructions=latest.definition.instructions
        )
        return save_version(ledger, project, rebased)[0]
    return latest


def definition_from_project_file(data: Any) -> TemplateDefinition:
    """A project's template from its JSON file:
    ``{"base": "rct", "custom_fields": [{"name", "type", "instruction"}...], "instructions": "..."}``."""
    if not isinstance(data, dict):
        raise ConfigError('a template file must be a JSON object such as {"base": "rct", "custom_fields": []}')
    unknown = set(data) - {"base", "custom_fields", "instructions"}
    if unknown:
        raise ConfigError(f"unknown key(s) in the template file: {', '.join(sorted(unknown))}")
    base_name = data.get("base", RCT_BASE)
    if not isinstance(base_name, str) or base_name not in BASE_TEMPLATES:
        raise ConfigError(f"unknown base template {base_name!r}; available: {', '.join(sorted(BASE_TEMPLATES))}")
    base = BASE_TEMPLATES[base_name]
    custom = parse_custom_fields(data.get("custom_fields", []))
    instructions = parse_instructions(data.get("instructions", ""))
    return TemplateDefinition(base.base, base.base_version, base.modules, custom, instructions)


def template_of_item(ledger: Ledger, item_id: int) -> TemplateVersion | None:
    """The template version frozen by the batch of ``item_id`` (None for a batch from a ledger
    older than templates, which extracts with the built-in base)."""
    query = (
        select(templates)
        .join(batches, batches.c.template_id == templates.c.id)
        .join(batch_items, batch_items.c.batch_id == batches.c.id)
        .where(batch_items.c.id == item_id)
    )
    with ledger.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return _from_row(row) if row else None


def template_of_batch(ledger: Ledger, batch_id: int) -> TemplateVersion | None:
    query = select(templates).join(batches, batches.c.template_id == templates.c.id).where(batches.c.id == batch_id)
    with ledger.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return _from_row(row) if row else None
