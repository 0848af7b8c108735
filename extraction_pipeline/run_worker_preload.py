"""Imported once by the server run workers are forked from (defs/run_workers.py): everything a run
needs before its first document, so that no run imports it again."""

from __future__ import annotations

import contextlib

# A module that fails to import here is imported again by the run that needs it, where Dagster
# reports the error on the run: the server must come up whatever the code location's state.
with contextlib.suppress(Exception):
    import dagster._cli  # noqa: F401  (the run command)

    import extraction_pipeline.definitions  # noqa: F401
    from extraction_pipeline.core.llm.litellm_loader import import_litellm

    import_litellm()
