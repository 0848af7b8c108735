"""The ledger: documents, batches and batch items, and the invariants that keep them true.

Workers never read-then-write: every state change is one conditional UPDATE naming the state it
leaves (see ``items.py``), batch creation is idempotent through a UNIQUE key (``batches.py``), and
progress is one grouped query (``queries.py``).
"""

from extraction_pipeline.core.ledger.database import Ledger, utcnow
from extraction_pipeline.core.ledger.schema import BatchStatus, ItemStatus

__all__ = ["BatchStatus", "ItemStatus", "Ledger", "utcnow"]
