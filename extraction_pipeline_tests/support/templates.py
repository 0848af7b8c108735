"""Batches as an earlier release made them: frozen on the two-arm RCT base (version 1).

A batch keeps the template version it froze, so a ledger upgraded to this release holds batches
whose results are in version 1's fields (``outcomes.N.events_treatment``, ``baseline.*``). A new
batch always freezes the current base, so a test makes such a batch the way an upgrade leaves it:
version 1 saved as the project's template and the batch pointing at it.
"""

from __future__ import annotations

from sqlalchemy import select, update

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.schema import batches
from extraction_pipeline.core.ledger.templates import save_version
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE_V1


def freeze_version_1(ledger: Ledger, batch_id: int) -> None:
    """Make ``batch_id`` (not yet extracted) a batch frozen on the RCT base version 1."""
    with ledger.engine.connect() as conn:
        project = conn.execute(select(batches.c.project).where(batches.c.id == batch_id)).scalar_one()
    version, _created = save_version(ledger, project, RCT_TEMPLATE_V1)
    with ledger.engine.begin() as conn:
        conn.execute(update(batches).where(batches.c.id == batch_id).values(template_id=version.id))
