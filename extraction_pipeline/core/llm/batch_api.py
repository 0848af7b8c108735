"""Half-price calls through a provider's batch API: the same requests as ordinary calls, sent as one
job, answered within 24 hours. The lifecycle (no state kept here: the caller stores the ids and
polls later):

- ``split_requests``: requests cut into groups that each fit one job (the provider's limits).
- ``submit``: one group sent as a job, tagged with the caller's submission key.
- ``find``: the job a submission key was given to, if the provider has it (a retried submit
  adopts it: a job is never paid for twice).
- ``poll``: the job's status and request counts.
- ``collect``: once the job has ended (completed, expired, cancelled or failed), every request's
  outcome: an answer priced at the batch price, or a failure saying why. Nothing a job leaves
  unanswered is lost: every failure is meant to be asked again as an ordinary call, and
  ``BatchFailure.error()`` is the exception that ordinary call's failure would have been.
- ``cancel``: stop the job (what it already answered is still collected).

Each function asks the model's adapter (``providers.adapter_for``) for its batch driver
(``BatchDriver``): OpenAI's (``providers/openai_batches.py``, through litellm) and Anthropic's
(``providers/anthropic_batches.py``, through the ``anthropic`` SDK). A model whose adapter has none
is refused (ConfigError). Every failure of the calls is classified: transient (a 5xx, 429,
timeout, dropped connection) or permanent (auth, bad request, unknown batch), and the message
never carries the API key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.llm.batch_model import (
    BatchDriver,
    BatchOutcome,
    BatchRequest,
    BatchState,
    SubmittedBatch,
)
from extraction_pipeline.core.llm.config import LLMConfig
from extraction_pipeline.core.llm.providers import adapter_for
from extraction_pipeline.core.templates.definition import TemplateDefinition


def supports_provider_batches(model: str | None) -> bool:
    """True when ``model`` is served by a provider whose batch API is driven here (OpenAI, Anthropic)."""
    if not model:
        return False
    config = LLMConfig(model=model)
    return not config.is_offline and adapter_for(config).batch_api() is not None


def driver_for(config: LLMConfig) -> BatchDriver:
    """The batch driver of the config's model; ConfigError when its provider has none here."""
    driver = None if config.is_offline else adapter_for(config).batch_api()
    if driver is None:
        raise ConfigError(
            f"{config.effective_model} has no provider batch API here: batches are sent to OpenAI "
            "(openai/...) and Anthropic (anthropic/...) only; use ordinary calls for this model"
        )
    return driver


def split_requests(
    config: LLMConfig,
    requests: Sequence[BatchRequest],
    *,
    max_requests: int | None = None,
    max_bytes: int | None = None,
) -> list[list[BatchRequest]]:
    """``requests`` in order, cut into groups that each fit one job (the provider's request and
    size limits, unless given). A single request larger than a whole job stays alone in its group;
    ``submit`` refuses it."""
    driver = driver_for(config)
    most_requests = max_requests if max_requests is not None else driver.max_requests
    most_bytes = max_bytes if max_bytes is not None else driver.max_bytes
    groups: list[list[BatchRequest]] = []
    current: list[BatchRequest] = []
    size = 0
    for request in requests:
        line = driver.request_size(config, request)
        if current and (len(current) >= most_requests or size + line > most_bytes):
            groups.append(current)
            current, size = [], 0
        current.append(request)
        size += line
    if current:
        groups.append(current)
    return groups


def submit(config: LLMConfig, requests: Sequence[BatchRequest], key: str | None = None) -> SubmittedBatch:
    """Send ``requests`` as one job, tagged with the submission ``key`` (``find``). Refuses
    (PermanentError) an empty list, repeated custom ids, or more than one job holds
    (``split_requests`` first)."""
    return driver_for(config).submit(config, requests, key)


def find(
    config: LLMConfig, key: str, *, since: datetime, count: int, known: frozenset[str] = frozenset()
) -> SubmittedBatch | None:
    """The job a ``submit`` with ``key`` (``count`` requests, at or after ``since``) created, if the
    provider has one the caller does not already follow (``known``): a submit retried after its
    answer was lost adopts it instead of paying for the same prompts again."""
    return driver_for(config).find(config, key, since=since, count=count, known=known)


def poll(config: LLMConfig, batch_id: str) -> BatchState:
    return driver_for(config).poll(config, batch_id)


def cancel(config: LLMConfig, batch_id: str) -> BatchState:
    """Ask the provider to stop the job (``cancelling``, then ``cancelled``, keeping what it
    already answered). A job that has already ended, or is being cancelled, is left as it is."""
    return driver_for(config).cancel(config, batch_id)


def collect(config: LLMConfig, state: BatchState, templates: Mapping[str, TemplateDefinition]) -> list[BatchOutcome]:
    """Every request's outcome once the job has ended, in the order of ``templates`` (custom id ->
    the template its answer is validated with); a request the provider reported nothing for fails
    saying why (the job expired, was cancelled or failed before running it)."""
    return driver_for(config).collect(config, state, templates)
