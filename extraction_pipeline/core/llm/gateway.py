"""One structured-output call through litellm: JSON mode, pydantic validation, one repair attempt.

litellm's own retries are disabled (``num_retries=0``, ``max_retries=0``): retry policy belongs to
the orchestrator, which backs off with jitter and keeps the ledger honest between attempts.

Every call states its output limit (``max_tokens``: configured, else litellm's figure for the
model), because some clients and providers default to a few thousand tokens, less than a
trial with many outcomes needs. An answer that stops there (``finish_reason: length``; litellm
maps Anthropic's ``max_tokens`` and Gemini's ``MAX_TOKENS`` to it) is an ``AnswerCutError``,
never a repair: asked again, the same question is cut again (the extraction asks smaller ones).

What a provider needs beyond the OpenAI shape (the schema it takes, cache marks, Ollama's context
window) is asked of the model's adapter (``providers.adapter_for``): no provider is named here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from extraction_pipeline.core.errors import (
    AnswerCutError,
    ExtractionRuntimeError,
    OutputParseError,
    PermanentError,
    RateLimitedError,
    TransientError,
    WithheldError,
)
from extraction_pipeline.core.llm.answer_parsing import parse_answer
from extraction_pipeline.core.llm.classify import ANSWER_TIMED_OUT, classify, network_cause, refusal_headers
from extraction_pipeline.core.llm.config import (
    CallBudget,
    LLMConfig,
    context_limit,
    count_tokens,
    fits_window,
    output_limit,
    prompt_room,
    sampling,
)
from extraction_pipeline.core.llm.litellm_loader import import_litellm
from extraction_pipeline.core.llm.offline import register_offline_provider
from extraction_pipeline.core.llm.providers import adapter_for
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.usage import Usage

# What callers import from here: the calls, and what configures and bounds them (defined in
# config.py and answer_parsing.py, which the provider adapters use without the gateway).
__all__ = [
    "CallBudget",
    "LLMConfig",
    "LLMResult",
    "cache_lifetime",
    "caches_only_marked",
    "complete_extraction",
    "complete_json",
    "context_limit",
    "count_tokens",
    "fits_window",
    "output_limit",
    "parse_answer",
    "prompt_room",
]


@dataclass(frozen=True)
class LLMResult:
    output: BaseModel  # an instance of output_model(template)
    usage: Usage
    repaired: bool
    content: str = ""  # the accepted answer's text, as the model sent it (stored to be paid once)


def _usage_of(litellm: Any, response: Any, config: LLMConfig) -> Usage:
    """Tokens and dollars of one answer, as litellm normalizes every provider's usage: the prompt
    tokens include the cached ones (Anthropic's ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` are added in; Gemini's ``promptTokenCount`` holds its
    ``cachedContentTokenCount``), and the cache reads are ``prompt_tokens_details.cached_tokens``
    for all of them. ``completion_cost`` prices the reads (and Anthropic's cache writes) at their own
    rates: that is what was paid. ``saved_usd`` is what the same tokens cost uncached, less that
    (negative when cache writes were not paid back); ``cache_written_tokens`` the cache writes."""
    usage = getattr(response, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
    cached = _cached_tokens(usage)
    written = _written_tokens(usage)
    cost = saved = 0.0
    if not config.is_offline:
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # unknown or local model: litellm has no price for it
            cost = 0.0
        if cost and (cached or written):
            # Negative when a cache write cost more than the reads it made cheaper.
            saved = _uncached_cost(litellm, config, tokens_in, tokens_out) - cost
    return Usage(
        model=config.effective_model,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=cost,
        cached_tokens=cached,
        saved_usd=saved,
        cache_written_tokens=written,
    )


def _cached_tokens(usage: Any) -> int:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached is None:  # an older litellm object: Anthropic's own field
        cached = getattr(usage, "cache_read_input_tokens", None)
    try:
        return max(0, int(cached or 0))
    except (TypeError, ValueError):
        return 0


def _written_tokens(usage: Any) -> int:
    """Prompt tokens written to the cache on this call (Anthropic's ``cache_creation_input_tokens``,
    which litellm keeps on its usage; providers that cache unasked charge nothing to write)."""
    try:
        return max(0, int(getattr(usage, "cache_creation_input_tokens", 0) or 0))
    except (TypeError, ValueError):
        return 0


def _uncached_cost(litellm: Any, config: LLMConfig, tokens_in: int, tokens_out: int) -> float:
    """The same prompt and answer priced as if nothing had been cached (0 when not priced)."""
    try:
        prompt_cost, answer_cost = litellm.cost_per_token(
            model=config.effective_model, prompt_tokens=tokens_in, completion_tokens=tokens_out
        )
    except Exception:
        return 0.0
    return float(prompt_cost or 0.0) + float(answer_cost or 0.0)


def _check_finished(response: Any, usage: Usage, limit: int | None) -> None:
    """An answer the provider stopped at the output limit is incomplete: say so, by its size; one it
    withheld (content filter, safety) or the model refused is a permanent error, never an empty
    extraction; a 200 with no choices is the provider's transient fault."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        # A 200 with nothing in it: the provider's fault, and another call may well answer.
        raise TransientError(f"{usage.model} answered with no choices (an empty answer)", usage=usage, provider=True)
    refusal = getattr(getattr(choices[0], "message", None), "refusal", None)
    if refusal:
        # The model declined (OpenAI's structured-outputs refusal): asked again, it declines again.
        raise PermanentError(f"{usage.model} refused: {str(refusal)[:300]}", usage=usage)
    if choices and getattr(choices[0], "finish_reason", None) == "content_filter":
        # litellm's word for Azure's content filter, Gemini's SAFETY (or a blocked prompt) and
        # Anthropic's refusal: the provider withheld the answer. Asked again, it withholds it again.
        raise WithheldError(
            f"{usage.model} withheld the answer (finish_reason content_filter: the provider's content filter or "
            "safety system stopped it); the document was not extracted",
            usage=usage,
        )
    if choices and getattr(choices[0], "finish_reason", None) == "length":
        at = limit or usage.tokens_out
        details = getattr(getattr(response, "usage", None), "completion_tokens_details", None)
        thought = int(getattr(details, "reasoning_tokens", 0) or 0)
        if thought and not (getattr(getattr(choices[0], "message", None), "content", None) or "").strip():
            # The whole limit went on thinking: a smaller question thinks as long again, so this is
            # not a cut answer to ask in parts but a limit too small for the model.
            raise PermanentError(
                f"{usage.model} spent its whole output limit of {at} tokens thinking ({thought} reasoning tokens) "
                "and wrote no answer: raise EXTRACTION_OUTPUT_TOKENS",
                usage=usage,
            )
        raise AnswerCutError(
            f"answer cut at {at} output tokens ({usage.model} stopped at its output limit)",
            output_tokens=at,
            usage=usage,
        )


def _check_context_window(config: LLMConfig, messages: list[dict[str, str]]) -> None:
    """A prompt longer than the model's context is an explicit permanent error, never silently
    truncated (the extraction splits long papers into parts before it gets here)."""
    if not fits_window(config, messages):
        needed = count_tokens(config, messages)
        raise PermanentError(
            f"document needs {needed} prompt tokens but {config.effective_model} accepts {prompt_room(config)}; "
            "it was not truncated: use a model with a larger context window"
        )


def _completion(
    litellm: Any, config: LLMConfig, kwargs: dict[str, Any], plain: list[dict[str, str]] | None = None
) -> Any:
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
    and the circuit breaker. ``plain``: the messages as strings, when those sent carry cache marks
    (what the budget counts)."""
    budget = config.budget if not config.is_offline else None
    if budget is None:
        return _send(litellm, config, kwargs, None, lambda: 0)[0]
    # What the provider counts against its limit when the call arrives: the prompt and the
    # longest answer asked for (OpenAI counts max_tokens, not what is then written). Its count
    # of the prompt is an estimate from the characters (about 4 a token): the larger of that and
    # the tokenizer's count is reserved, so a call is never sent short.
    messages = plain if plain is not None else kwargs["messages"]

    def estimate() -> int:
        by_chars = -(-sum(len(str(m.get("content") or "")) for m in messages) // 4)
        return max(count_tokens(config, messages), by_chars) + int(kwargs.get("max_tokens") or 0)

    waited = 0.0
    for refusal in range(MAX_WAITED_REFUSALS + 1):
        cap = budget.output_cap(config.effective_model) if kwargs.get("max_tokens") else None
        if cap and kwargs["max_tokens"] > cap:  # learned from a refusal: a larger ask could never start
            kwargs["max_tokens"] = cap
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
        answer = int(getattr(usage, "completion_tokens", 0) or 0)
        used = int(getattr(usage, "prompt_tokens", 0) or 0) + answer
        headers = (getattr(response, "_hidden_params", None) or {}).get("additional_headers")
        budget.after_call(reservation, used or None, headers, used_output=answer if used else None)
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
        asked = int(kwargs.get("max_tokens") or 0)
        reservation = budget.before_call(config.effective_model, estimate, asked) if budget is not None else None
        try:
            return litellm.completion(**kwargs), reservation
        except Exception as exc:
            classified = classify(exc, config.timeout_seconds)
            if network_cause(exc) == ANSWER_TIMED_OUT and classified.usage is None:
                # Asked and given up on: the provider may still answer it, and bill it.
                classified.usage = Usage(config.effective_model, abandoned_calls=1)
            if budget is not None:
                retry_after = classified.retry_after if isinstance(classified, TransientError) else None
                said = refusal_headers(exc)
                limited = isinstance(classified, RateLimitedError)
                waited = budget.after_refusal(reservation, retry_after, said[0] if said else None, rate_limited=limited)
                if isinstance(classified, RateLimitedError) and retry_after is None and waited:
                    classified.retry_after = waited  # a 429 with no hint: waited by the budget, not guessed
            raise classified from exc


def caches_only_marked(config: LLMConfig) -> bool:
    """Whether the model's provider caches only what a request marks (and charges for the write)."""
    return not config.is_offline and adapter_for(config).cache_marks


def cache_lifetime(config: LLMConfig) -> float:
    """Seconds a prompt prefix stays in the model's provider's cache after its last use."""
    return 0.0 if config.is_offline else adapter_for(config).cache_ttl_seconds


def schema_prompt_tokens(config: LLMConfig, template: TemplateDefinition) -> int:
    """Prompt tokens a call pays for the response schema sent beside its messages: the schema's
    tokens where the provider bills it as prompt and the call sends it (structured output, not
    JSON mode), else 0. What the estimate adds to each call's messages."""
    if config.is_offline:
        return 0
    adapter = adapter_for(config)
    sent = adapter.response_format(config, template)
    if not adapter.bills_schema_as_prompt() or sent.get("type") != "json_schema":
        return 0
    text = json.dumps(sent["json_schema"], separators=(",", ":"))
    return int(import_litellm().token_counter(model=config.effective_model, text=text))


def answer_limit(config: LLMConfig) -> int | None:
    """The ``max_tokens`` a call asks for: ``output_limit``, within the most the model's output
    budget lets one call start with (a provider that meters output per minute from ``max_tokens``:
    on an account allowed 8,000 output tokens a minute, a call asking for more never starts)."""
    limit = output_limit(config, thinking=not config.is_offline and adapter_for(config).thinks(config))
    cap = config.budget.output_cap(config.effective_model) if config.budget is not None and limit else None
    return min(limit, cap) if limit and cap else limit


def _call_kwargs(
    config: LLMConfig, messages: list[dict[str, str]], limit: int | None, *, cache: bool = False
) -> dict[str, Any]:
    """The arguments of one call, with what the provider needs beyond the OpenAI shape (``cache``:
    mark the paper's prefix for a provider whose cache reads only what is marked)."""
    kwargs: dict[str, Any] = {
        "model": config.effective_model,
        "messages": messages,
        "timeout": config.timeout_seconds,
        "num_retries": 0,
        "max_retries": 0,
        **sampling(config),
    }
    if limit:
        kwargs["max_tokens"] = limit
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if config.api_key:
        kwargs["api_key"] = config.api_key
    if config.is_offline:
        return kwargs
    adapter = adapter_for(config)
    kwargs["messages"] = adapter.messages_for(messages, cache=cache)
    kwargs.update(adapter.call_options(config, messages, limit))
    return kwargs


def _with_paid(spent: Usage, exc: ExtractionRuntimeError) -> Usage:
    """What was paid before a call failed, plus what the failed call itself counts (a call
    abandoned at the timeout: possibly billed)."""
    return spent + (exc.usage if isinstance(exc.usage, Usage) else None)


QUOTE_LESS = (
    "An earlier answer to this question was withheld, perhaps for quoting the document at length. "
    "Quote no more than identifies each value: one sentence or one table row, never longer passages."
)


def quoting_less(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The same question, asking the last user turn to quote as little as identifies each value."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is None:
        return list(messages)
    asked = dict(messages[last])
    asked["content"] = f"{asked.get('content') or ''}\n\n{QUOTE_LESS}"
    return [*messages[:last], asked, *messages[last + 1 :]]


def complete_json(config: LLMConfig, messages: list[dict[str, str]]) -> tuple[str, Usage]:
    """One call asking for a JSON object (no schema, no repair): (content, usage). Raises
    TransientError / PermanentError as classified; the caller validates the content."""
    litellm = import_litellm()
    _check_context_window(config, messages)
    limit = answer_limit(config)
    kwargs = _call_kwargs(config, messages, limit)
    kwargs["response_format"] = {"type": "json_object"}
    response = _completion(litellm, config, kwargs, messages)
    usage = _usage_of(litellm, response, config)
    _check_finished(response, usage, limit)
    return response.choices[0].message.content or "", usage


def complete_extraction(
    config: LLMConfig, messages: list[dict[str, str]], template: TemplateDefinition, *, cache: bool = False
) -> LLMResult:
    """Ask the model for an answer shaped by ``template``. ``cache``: the caller expects the
    paper's prefix to be read again within the provider's cache lifetime (``prompt_cache``), so a
    provider that caches only what is marked gets the marks (the repair, appended to the same
    conversation, reads them). Raises TransientError / PermanentError / OutputParseError (after one
    repair attempt) / AnswerCutError."""
    litellm = import_litellm()
    if config.is_offline:
        register_offline_provider()
    limit = answer_limit(config)

    def call(conversation: list[dict[str, str]]) -> Any:
        kwargs = _call_kwargs(config, conversation, limit, cache=cache)
        if config.is_offline:
            return _completion(litellm, config, kwargs, conversation)
        adapter = adapter_for(config)
        kwargs["response_format"] = adapter.response_format(config, template)
        try:
            return _completion(litellm, config, kwargs, conversation)
        except PermanentError as exc:
            if kwargs["response_format"].get("type") != "json_schema" or not adapter.schema_refused(exc):
                raise
        # The provider will not serve this schema: JSON mode (the schema is in the prompt, and the
        # answer is validated against it either way), for this call and the later ones.
        adapter.refuse_schema(config, template)
        kwargs["response_format"] = adapter.response_format(config, template)
        return _completion(litellm, config, kwargs, conversation)

    _check_context_window(config, messages)
    response = call(messages)
    usage = _usage_of(litellm, response, config)
    try:
        _check_finished(response, usage, limit)
    except WithheldError as withheld:
        if config.is_offline or not adapter_for(config).withholds_recitation:
            raise
        # Perhaps a recitation stop: asked once more, to quote as little as identifies each value.
        messages = quoting_less(messages)
        try:
            _check_context_window(config, messages)
            response = call(messages)
        except ExtractionRuntimeError as exc:
            exc.usage = _with_paid(usage, exc)  # the withheld answer was paid for
            raise
        again = _usage_of(litellm, response, config)
        usage = usage + again
        try:
            _check_finished(response, again, limit)
        except WithheldError:
            raise WithheldError(
                f"{usage.model} withheld the answer twice (finish_reason content_filter, which litellm reports for "
                "Gemini's RECITATION, a stop on text quoted at length, for SAFETY and for a blocked prompt alike), "
                "the second time when asked to quote no more than a sentence or a table row per value; the document "
                "was not extracted",
                usage=usage,
            ) from withheld
        except ExtractionRuntimeError as exc:
            exc.usage = usage  # both answers were paid for
            raise
    content = response.choices[0].message.content
    try:
        return LLMResult(parse_answer(content, template), usage, repaired=False, content=content or "")
    except (ValueError, ValidationError) as first_error:
        repair = [
            *messages,
            # never empty: Anthropic refuses an empty assistant turn inside a conversation
            {"role": "assistant", "content": content or "(no answer)"},
            {
                "role": "user",
                "content": f"Your answer was not valid ({str(first_error)[:300]}). "
                "Reply with only the corrected JSON object matching the schema.",
            },
        ]
        try:
            response = call(repair)
        except ExtractionRuntimeError as exc:
            exc.usage = _with_paid(usage, exc)  # the first answer's tokens were spent and must still be counted
            raise
        repair_usage = _usage_of(litellm, response, config)
        try:
            _check_finished(response, repair_usage, limit)
        except ExtractionRuntimeError as exc:
            exc.usage = usage + repair_usage  # both answers were paid for
            raise
        usage = usage + repair_usage
        repaired = response.choices[0].message.content
        try:
            return LLMResult(parse_answer(repaired, template), usage, repaired=True, content=repaired or "")
        except (ValueError, ValidationError) as second_error:
            raise OutputParseError(
                f"model output is not valid JSON for the schema after one repair: {str(second_error)[:300]}",
                original=second_error,
                usage=usage,
            ) from second_error
