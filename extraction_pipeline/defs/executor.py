"""Where a run's steps execute: in the run's own process, or on Celery workers.

``in_process`` (the default): one process per run runs all its steps (a run costs 4-8 CPU-s
less than a process per step: every process imports the code location).

``celery`` (``EXTRACTION_EXECUTOR=celery``): Dagster's ``celery_executor`` sends each step to a
queue named after what it needs, and `extraction-pipeline worker --queue <name>` processes on
any machine take them. Parsing and model calls scale separately:

- ``pdf_parse``: the parse step (CPU-bound; size these workers by cores);
- ``llm``: the extraction step (waits on the provider; the `llm` pool still bounds calls);
- ``export``: a workbook materialized by hand from the UI. The aggregator's own export runs
  always run in-process beside the daemon, where the download page reads the files.

A worker shares only PostgreSQL (ledger and Dagster storage: documents' bytes and parse results
are in the ledger) and the broker with the daemon. A worker killed mid-step loses nothing: tasks
are acknowledged only when done (``task_acks_late``), so the broker hands the step to another
worker, which finds the documents the dead one had finished already completed.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg

from extraction_pipeline.core.settings import Settings

QUEUE_TAG = "dagster-celery/queue"
PARSE_QUEUE, LLM_QUEUE, EXPORT_QUEUE = "pdf_parse", "llm", "export"
QUEUES = (PARSE_QUEUE, LLM_QUEUE, EXPORT_QUEUE)
# Given to the executor (which sends) and written for every worker (which acknowledges):
# a step's message is acknowledged only once the step is done, and a worker process that dies
# mid-step gives it back, so another worker runs it. One message at a time per worker process.
CELERY_SETTINGS: dict[str, Any] = {
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,
}


def queue_tags(queue: str) -> dict[str, str]:
    """Op tags routing a step to a Celery queue (ignored by the in-process executor)."""
    return {QUEUE_TAG: queue}


CELERY_EXECUTOR = "celery"


def on_celery(job: dg.JobDefinition) -> bool:
    """Whether the job's steps run on Celery workers (possibly other machines)."""
    return job.executor_def.name == CELERY_EXECUTOR


def step_executor(settings: Settings) -> dg.ExecutorDefinition:
    if settings.executor != CELERY_EXECUTOR:
        return dg.in_process_executor
    from dagster_celery import celery_executor  # only deployments that use it pay for the import

    return celery_executor.configured(
        {
            "broker": _from_env("EXTRACTION_CELERY_BROKER", settings.celery_broker),
            "backend": _from_env("EXTRACTION_CELERY_BACKEND", settings.celery_backend),
            "config_source": CELERY_SETTINGS,
        },
        name=CELERY_EXECUTOR,
    )


def _from_env(name: str, value: str) -> str | dict[str, str]:
    # A variable that is set is read by the process that sends the steps, by name: a broker URL
    # may hold a password, and configuration values are shown in the UI. Unset: the default.
    return {"env": name} if os.environ.get(name) else value
