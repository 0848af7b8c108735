"""Partition definitions: one partition per registered document, one per batch (for its export)."""

import dagster as dg

# Keys are ledger ids ("doc-12"), never filenames: commas and slashes break UI selection.
DOCUMENTS_PARTITIONS = "documents"
documents_partitions = dg.DynamicPartitionsDefinition(name=DOCUMENTS_PARTITIONS)

# "batch-7": the export workbook of batch 7.
batches_partitions = dg.DynamicPartitionsDefinition(name="batches")

BATCH_PARTITION_PREFIX = "batch-"


def batch_partition_key(batch_id: int) -> str:
    return f"{BATCH_PARTITION_PREFIX}{batch_id}"


def batch_id_from_partition(key: str) -> int:
    suffix = key.removeprefix(BATCH_PARTITION_PREFIX)
    if key == suffix or not suffix.isdigit():
        raise ValueError(f"not a batch partition key: {key!r}")
    return int(suffix)
