"""The hidden, stable id of each Values-sheet row: which value, and which decision state the
workbook showed, signed so that an edited id is refused instead of deciding some other value.

``r1|<item id>|<path>|<seq>|<signature>``: ``seq`` is the value's decision number when the workbook
was written (0: undecided), the base the import's decision is made from. The signature is a digest
over the batch's random uid, which appears nowhere in the workbook, so an id cannot be forged by
editing its visible parts.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

PREFIX = "r1"


@dataclass(frozen=True)
class RowId:
    item_id: int
    path: str
    seq: int


def _signature(batch_uid: str, item_id: int, path: str, seq: int) -> str:
    return hashlib.sha256(f"{batch_uid}|{item_id}|{path}|{seq}".encode()).hexdigest()[:16]


def make_row_id(batch_uid: str, item_id: int, path: str, seq: int) -> str:
    return f"{PREFIX}|{item_id}|{path}|{seq}|{_signature(batch_uid, item_id, path, seq)}"


def parse_row_id(text: str) -> RowId | None:
    """The id's parts, or None if it is not shaped like one (the signature is checked separately,
    once the item's batch is known)."""
    parts = text.strip().split("|")
    if len(parts) != 5 or parts[0] != PREFIX or not parts[1].isdigit() or not parts[3].isdigit():
        return None
    return RowId(int(parts[1]), parts[2], int(parts[3]))


def signed_by(text: str, batch_uid: str) -> bool:
    row = parse_row_id(text)
    if row is None:
        return False
    return hmac.compare_digest(text.strip().rsplit("|", 1)[1], _signature(batch_uid, row.item_id, row.path, row.seq))
