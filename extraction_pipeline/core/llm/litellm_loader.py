"""litellm, imported the one way every call of ours needs it."""

from __future__ import annotations

import os
from typing import Any


def import_litellm() -> Any:
    """The litellm module, quiet and offline-safe: without ``LITELLM_LOCAL_MODEL_COST_MAP`` it tries
    to download its price map at import and, offline, retries for seconds; no telemetry, no
    debug banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm
