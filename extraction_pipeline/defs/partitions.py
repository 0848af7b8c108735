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


def documents_backfill_policy(documents_per_run: int) -> dg.BackfillPolicy:
    """How many document partitions one run of a UI backfill carries (Dagster splits the selection
    into runs of at most this many contiguous partitions; the dispatcher's runs take as many).
    Each document keeps its own materialization, ledger item, failure and retry; the run's
    start-up cost (process, imports, code location) is what is shared."""
    return dg.BackfillPolicy.multi_run(max_partitions_per_run=documents_per_run)
