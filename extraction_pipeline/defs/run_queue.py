"""What Dagster's run queue allows one analyst: the dispatcher spreads a batch over no more runs.

The instance's `concurrency: runs:` settings (dagster.yaml) cap the runs going at once, in all
(``max_concurrent_runs``) and per value of a tag (``tag_concurrency_limits``; ours limits runs per
``extraction/user``). A batch's runs beyond that only wait in the queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from extraction_pipeline.defs.binding import USER_TAG


def analyst_run_limit(instance: dg.DagsterInstance) -> int:
    """The most runs one analyst's batch gets at once under the instance's run queue: the lowest
    of ``max_concurrent_runs`` and the limits that apply to runs tagged with an analyst. 0: no
    limit (a coordinator without a queue, or both limits off)."""
    try:
        config = instance.get_concurrency_config().run_queue_config
    except Exception:  # an instance without a run queue (ephemeral, a custom coordinator)
        return 0
    if config is None:
        return 0
    limits = [config.max_concurrent_runs] if config.max_concurrent_runs >= 0 else []
    limits += [_tag_limit(entry) for entry in config.tag_concurrency_limits if _applies_per_analyst(entry)]
    return max(0, min(limits)) if limits else 0


def _applies_per_analyst(entry: Mapping[str, Any]) -> bool:
    """A limit on our tag for every value (per analyst, or all analysts together): both bound
    one analyst's runs. A limit on one named value binds only that analyst: not counted."""
    if entry.get("key") != USER_TAG:
        return False
    value = entry.get("value")
    return value is None or (isinstance(value, Mapping) and bool(value.get("applyLimitPerUniqueValue")))


def _tag_limit(entry: Mapping[str, Any]) -> int:
    return int(entry.get("limit", 0))
