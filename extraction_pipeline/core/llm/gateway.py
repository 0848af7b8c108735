"""One structured-output call through litellm: JSON mode, pydantic validation, one repair attempt.

litellm's own retries are disabled (``num_retries=0``, ``max_retries=0``): retry policy belongs to
the orchestrator, which backs off with jitter and keeps the ledger honest between attempts.

Every call states its output limit (``max_tokens``: configured, else litellm's figure for the
model), because some clients and providers default to a few thousand tokens, less than a
trial with many outcomes needs. An answer that stops there (``finish_reason: length``; litellm
maps Anthropic's ``max_tokens`` and Gemini's ``MAX_TOKENS`` to it) is an ``AnswerCutError``,
never a repair: asked again, the same question is cut again (the extraction asks smaller ones).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from extraction_pipeline.core.errors import (
    AnswerCutError,
    OutputParseError,
    PermanentError,
    RateLimitedError,
    TransientError,
)
from extraction_pipeline.core.llm.classify import classify, refusal_headers
from extraction_pipeline.core.llm.offline import OFFLINE_MODEL, OFFLINE_PROVIDER, register_offline_provider
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.schema import output_json_schema, output_model
from extraction_pipeline.core.usage import Usage

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class CallBudget(Protocol):
    """The provider's token and request budget, spent call by call (core/ledger/budgets.py keeps
    it for the whole instance). ``before_call`` blocks until the call fits (``tokens`` is asked
    only when a limit is known: counting loads a tokenizer); the others report what the provider
    then counted and said, and ``waiting_out`` that a refused call waits ``seconds`` to be sent
    again (its reservation was given back in ``after_refusal``)."""

    def before_call(self, model: str, tokens: Callable[[], int]) -> Any: ...

    def after_call(self, reservation: Any, used_tokens: int | None, headers: Any) -> None: ...

    def after_refusal(self, reservation: Any, retry_after: float | None, headers: Any) -> None: ...

    def waiting_out(self, cause: str, seconds: float) -> None: ...


@dataclass(frozen=True)
class LLMConfig:
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never printed
    timeout_seconds: float = 120.0
    context_tokens: int | None = None  # the context window; None: litellm's figure for the model
    output_tokens: int | None = None  # the answer limit; None: litellm's figure for the model
    # Entered around each paid call: holds one of the provider's concurrency slots for exactly the
    # call (the orchestrator supplies it; None: no limit here).
    call_gate: Callable[[], AbstractContextManager[None]] | None = field(default=None, repr=False, compare=False)
    # Spent around each paid call, once its slot is taken (None: no budget kept).
    budget: CallBudget | None = field(default=None, repr=False, compare=False)

    @property
    def effective_model(self) -> str:
        return self.model or OFFLINE_MODEL

    @property
    def is_offline(self) -> bool:
        return self.effective_model.startswith(f"{OFFLINE_PROVIDER}/")


@dataclass(frozen=True)
class LLMResult:
    output: BaseModel  # an instance of output_model(template)
    usage: Usage
    repaired: bool
    content: str = ""  # the accepted answer's text, as the model sent it (stored to be paid once)


def _import_litellm() -> Any:
    # Offline, litellm otherwise tries to download its price map at import and retries for seconds.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def parse_answer(content: str | None, template: TemplateDefinition) -> BaseModel:
    """The answer text validated into the template's output model (also for a stored answer)."""
    return _parse(content, template)


def _parse(content: str | None, template: TemplateDefinition) -> BaseModel:
    if not content:
        raise ValueError("empty response")
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content
    return output_model(template).model_validate(json.loads(text))


def _usage_of(litellm: Any, response: Any, config: LLMConfig) -> Usage:
    usage = getattr(response, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
    cost = 0.0
    if not config.is_offline:
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # unknown or local model: litellm has no price for it
            cost = 0.0
    return Usage(model=config.effective_model, tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost)


def _response_format(litellm: Any, config: LLMConfig, template: TemplateDefinition) -> dict[str, Any]:
    """JSON Schema structured output where the provider supports it, JSON mode otherwise (the
    schema is then in the system prompt, and the answer is validated with pydantic either way)."""
    try:
        supports_schema = bool(litellm.supports_response_schema(model=config.effective_model))
    except Exception:  # unknown model: litellm cannot tell
        supports_schema = False
    if supports_schema:
        schema = {"name": "trial_extraction", "schema": output_json_schema(template), "strict": False}
        return {"type": "json_schema", "json_schema": schema}
    return {"type": "json_object"}


def context_limit(config: LLMConfig) -> int | None:
    """How many prompt tokens the model takes: its window (configured, else litellm's figure for
    the model) less the answer's limit, which providers count inside the same window; None when
    the window is not known (the provider then judges, and a context-length error is classified
    permanent)."""
    if config.is_offline:
        return None
    window = config.context_tokens
    if not window:
        try:
            window = _import_litellm().get_model_info(config.effective_model).get("max_input_tokens")
        except Exception:
            return None
    if not window:
        return None
    return int(window) - _kept_for_answer(config, int(window))


def _kept_for_answer(config: LLMConfig, window: int) -> int:
    answer = output_limit(config) or 0
    return answer if answer < window // 2 else 0  # a limit that large is not the window's share


def prompt_room(config: LLMConfig) -> str:
    """The prompt limit in words, for errors: "111616 prompt tokens (its 128000-token window less
    16384 kept for the answer)"."""
    limit = context_limit(config)
    if limit is None:
        return "an unknown number of prompt tokens"
    kept = _kept_for_answer(config, limit + (output_limit(config) or 0))
    if not kept:
        return f"{limit} prompt tokens"
    return f"{limit} prompt tokens (its {limit + kept}-token window less {kept} kept for the answer)"


def output_limit(config: LLMConfig) -> int | None:
    """How many tokens an answer may have: the configured limit, else litellm's figure for the
    model (``max_output_tokens``); None when neither is known (the provider's default applies)."""
    if config.is_offline:
        return None
    if config.output_tokens:
        return config.output_tokens
    try:
        info = _import_litellm().get_model_info(config.effective_model)
    except Exception:
        return None
    limit = info.get("max_output_tokens") or info.get("max_tokens")
    return int(limit) if limit else None


def _check_finished(response: Any, usage: Usage, limit: int | None) -> None:
    """An answer the provider stopped at the output limit is incomplete: say so, by its size."""
    choices = getattr(response, "choices", None) or []
    if choices and getattr(choices[0], "finish_reason", None) == "length":
        at = limit or usage.tokens_out
        raise AnswerCutError(
            f"answer cut at {at} output tokens ({usage.model} stopped at its output limit)",
            output_tokens=at,
            usage=usage,
        )


def count_tokens(config: LLMConfig, messages: list[dict[str, str]]) -> int:
    return int(_import_litellm().token_counter(model=config.effective_model, messages=messages))


def _check_context_window(litellm: Any, config: LLMConfig, messages: list[dict[str, str]]) -> None:
    """A prompt longer than the model's context is an explicit permanent error, never silently
    truncated (the extraction splits long papers into parts before it gets here)."""
    limit = context_limit(config)
    if not limit:
        return
    needed = count_tokens(config, messages)
    if needed > limit:
        raise PermanentError(
            f"document needs {needed} prompt tokens but {config.effective_model} accepts {prompt_room(config)}; "
            "it was not truncated: use a model with a larger context window"
        )


def _completion(litellm: Any, config: LLMConfig, kwargs: dict[str, Any]) -> Any:
    """One paid call: the call gate when there is one (the gate's own failures, such as a lost
    database, are not the provider's and are not classified as such), then, holding it, the
    call's share of the provider's budget (waiting until it fits, which is neither an attempt nor
    a failure), then the call. The budget is reserved at the moment the call is sent: a call
    that reserved first and then queued for a slot would reach the provider later than its
    reservation said, together with calls reserved after it, and be refused.

    With a budget kept, a refusal for the account's rate limit that names its ``Retry-After`` is
    waited out here and the call sent again: the provider is answering, the call was early, and
    every other call of the model waits for the same moment (the budget pauses). Only a refusal
    past ``MAX_WAITED_REFUSALS`` or ``MAX_WAIT_IN_CALL_SECONDS`` is raised, for the step's retries
    and the circuit breaker."""
    budget = config.budget if not config.is_offline else None
    if budget is None:
        return _send(litellm, config, kwargs, None, lambda: 0)[0]
    # What the provider counts against its limit when the call arrives: the prompt and the
    # longest answer asked for (OpenAI counts max_tokens, not what is then written). Its count
    # of the prompt is an estimate from the characters (about 4 a token): the larger of that and
    # the tokenizer's count is reserved, so a call is never sent short.
    messages = kwargs["messages"]

    def estimate() -> int:
        by_chars = -(-sum(len(str(m.get("content") or "")) for m in messages) // 4)
        return max(count_tokens(config, messages), by_chars) + int(kwargs.get("max_tokens") or 0)

    waited = 0.0
    for refusal in range(MAX_WAITED_REFUSALS + 1):
        try:
            response, reservation = _send(litellm, config, kwargs, budget, estimate)
        except RateLimitedError as exc:
            pause = exc.retry_after
            if pause is None or refusal == MAX_WAITED_REFUSALS or waited + pause > MAX_WAIT_IN_CALL_SECONDS:
                raise
            waited += pause
            budget.waiting_out(str(exc), pause)
            continue
        usage = getattr(response, "usage", None)
        used = int(getattr(usage, "prompt_tokens", 0) or 0) + int(getattr(usage, "completion_tokens", 0) or 0)
        headers = (getattr(response, "_hidden_params", None) or {}).get("additional_headers")
        budget.after_call(reservation, used or None, headers)
        return response
    raise AssertionError("unreachable: the last refusal is raised")


# A rate limit is waited out inside the call this often, for this long in all, before it is
# raised: beyond that the account is out of quota for longer than a storm lasts.
MAX_WAITED_REFUSALS = 10
MAX_WAIT_IN_CALL_SECONDS = 600.0


def _send(
    litellm: Any, config: LLMConfig, kwargs: dict[str, Any], budget: CallBudget | None, estimate: Callable[[], int]
) -> tuple[Any, Any]:
    """Inside the call gate: the budget's wait, then the call; (response, reservation). A
    failure is classified, and told to the budget."""
    gate = config.call_gate() if config.call_gate is not None and not config.is_offline else nullcontext()
    with gate:
        reservation = budget.before_call(config.effective_model, estimate) if budget is not None else None
        try:
            return litellm.completion(**kwargs), reservation
        except Exception as exc:
            classified = classify(exc)
            if budget is not None:
                retry_after = classified.retry_after if isinstance(classified, TransientError) else None
                said = refusal_headers(exc)
                budget.after_refusal(reservation, retry_after, said[0] if said else None)
            raise classified from exc


def complete_json(config: LLMConfig, messages: list[dict[str, str]]) -> tuple[str, Usage]:
    """One call asking for a JSON object (no schema, no repair): (content, usage). Raises
    TransientError / PermanentError as classified; the caller validates the content."""
    litellm = _import_litellm()
    _check_context_window(litellm, config, messages)
    kwargs: dict[str, Any] = {
        "model": config.effective_model,
        "messages": messages,
        "timeout": config.timeout_seconds,
        "num_retries": 0,
        "max_retries": 0,
        "temperature": 0,
        "response_format": {"type": "json_object"},
    }
    limit = output_limit(config)
    if limit:
        kwargs["max_tokens"] = limit
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if config.api_key:
        kwargs["api_key"] = config.api_key
    response = _completion(litellm, config, kwargs)
    usage = _usage_of(litellm, response, config)
    _check_finished(response, usage, limit)
    return response.choices[0].message.content or "", usage


def complete_extraction(config: LLMConfig, messages: list[dict[str, str]], template: TemplateDefinition) -> LLMResult:
    """Ask the model for an answer shaped by ``template``. Raises TransientError /
    PermanentError / OutputParseError (after one repair attempt) / AnswerCutError."""
    litellm = _import_litellm()
    if config.is_offline:
        register_offline_provider()
    limit = output_limit(config)

    def call(conversation: list[dict[str, str]]) -> Any:
        kwargs: dict[str, Any] = {
            "model": config.effective_model,
            "messages": conversation,
            "timeout": config.timeout_seconds,
            "num_retries": 0,
            "max_retries": 0,
            "temperature": 0,
        }
        if not config.is_offline:
            kwargs["response_format"] = _response_format(litellm, config, template)
        if limit:
            kwargs["max_tokens"] = limit
        if config.api_base:
            kwargs["api_base"] = config.api_base
        if config.api_key:
            kwargs["api_key"] = config.api_key
        return _completion(litellm, config, kwargs)

    _check_context_window(litellm, config, messages)
    response = call(messages)
    usage = _usage_of(litellm, response, config)
    _check_finished(response, usage, limit)
    content = response.choices[0].message.content
    try:
        return LLMResult(_parse(content, template), usage, repaired=False, content=content or "")
    except (ValueError, ValidationError) as first_error:
        repair = [
            *messages,
            {"role": "assistant", "content": content or ""},
            {
                "role": "user",
                "content": f"Your answer was not valid ({str(first_error)[:300]}). "
                "Reply with only the corrected JSON object matching the schema.",
            },
        ]
        try:
            response = call(repair)
        except TransientError as exc:
            exc.usage = usage  # the first answer's tokens were spent and must still be counted
            raise
        repair_usage = _usage_of(litellm, response, config)
        try:
            _check_finished(response, repair_usage, limit)
        except AnswerCutError as cut:
            cut.usage = usage + repair_usage  # both answers were paid for
            raise
        usage = usage + repair_usage
        repaired = response.choices[0].message.content
        try:
            return LLMResult(_parse(repaired, template), usage, repaired=True, content=repaired or "")
        except (ValueError, ValidationError) as second_error:
            raise OutputParseError(
                f"model output is not valid JSON for the schema after one repair: {str(second_error)[:300]}",
                original=second_error,
                usage=usage,
            ) from second_error
