"""Imported once by the server run workers are forked from (defs/run_workers.py): everything a run
needs before its first document, so that no run imports it again."""

from __future__ import annotations

import importlib
import sys
import traceback

# The run command, the daemon's own entry point (each worker runs it again as its main module,
# like a spawned process), the code location, litellm.
PRELOAD = ("dagster._cli", "dagster._daemon.cli", "extraction_pipeline.definitions")

for _name in PRELOAD:
    try:
        importlib.import_module(_name)
    except Exception:  # the run that needs it imports it again, and Dagster reports the error there
        print(f"run worker server: could not preload {_name}; runs import it themselves:", file=sys.stderr)
        traceback.print_exc()
try:
    from extraction_pipeline.core.llm.litellm_loader import import_litellm

    import_litellm()
except Exception:
    print("run worker server: could not preload litellm; runs import it themselves:", file=sys.stderr)
    traceback.print_exc()
