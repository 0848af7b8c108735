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
    """Tokens and dollars of one answer, as litellm normalizes every provider's usage: the prompt
    tokens include the cached ones (Anthropic's ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` are added in; Gemini's ``promptTokenCount`` holds its
    ``cachedContentTokenCount``), and the cache reads are ``prompt_tokens_details.cached_tokens``
    for all of them. ``completion_cost`` prices the reads (and Anthropic's cache writes) at their own
    rates: that is what was paid. ``saved_usd`` is what the same tokens cost uncached, less that."""
    usage = getattr(response, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
    cached = _cached_tokens(usage)
    cost = saved = 0.0
    if not config.is_offline:
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # unknown or local model: litellm has no price for it
            cost = 0.0
        if cost and cached:
            saved = max(0.0, _uncached_cost(litellm, config, tokens_in, tokens_out) - cost)
    return Usage(
        model=config.effective_model,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=cost,
        cached_tokens=cached,
        saved_usd=saved,
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


def _uncached_cost(litellm: Any, config: LLMConfig, tokens_in: int, tokens_out: int) -> float:
    """The same prompt and answer priced as if nothing had been cached (0 when not priced)."""
    try:
        prompt_cost, answer_cost = litellm.cost_per_token(
            model=config.effective_model, prompt_tokens=tokens_in, completion_tokens=tokens_out
        )
    except Exception:
        return 0.0
    return float(prompt_cost or 0.0) + float(answer_cost or 0.0)


def _provider(litellm: Any, config: LLMConfig) -> str:
    """litellm's provider for the model string ("anthropic", "gemini", "azure", "ollama_chat", ...)."""
    try:
        return str(litellm.get_llm_provider(config.effective_model, api_base=config.api_base)[1])
    except Exception:
        return config.effective_model.split("/", 1)[0]


def _response_format(litellm: Any, config: LLMConfig, template: TemplateDefinition) -> dict[str, Any]:
    """JSON Schema structured output where the provider supports it, JSON mode otherwise (the
    schema is then in the system prompt, and the answer is validated with pydantic either way).

    Per provider, what litellm 1.110 does with a schema, and what the provider then accepts:
    - Anthropic: litellm sends it as ``output_format`` (constrained decoding), which refuses a
      schema with more than 24 optional or 16 union-typed properties ("too complex for
      compilation"); ours has a hundred of each (every field is nullable and optional). litellm's
      own check says when a schema is beyond that; then JSON mode (no ``output_format``).
    - Gemini: litellm sends it as ``responseJsonSchema`` unchanged; Gemini accepts only a subset
      (no ``default``, nothing beside a ``$ref``): it is sent reduced to that subset.
    - Ollama: JSON mode (``format: "json"``): its grammar-constrained JSON schemas do not take
      every construct of ours, and the small local models answer as well without it."""
    try:
        supports_schema = bool(litellm.supports_response_schema(model=config.effective_model))
    except Exception:  # unknown model: litellm cannot tell
        supports_schema = False
    if not supports_schema:
        return {"type": "json_object"}
    schema = output_json_schema(template)
    provider = _provider(litellm, config)
    if provider == "anthropic" and not _anthropic_takes(schema):
        return {"type": "json_object"}
    if provider in ("gemini", "vertex_ai", "vertex_ai_beta"):
        schema = gemini_schema(schema)
    return {"type": "json_schema", "json_schema": {"name": "trial_extraction", "schema": schema, "strict": False}}


def _anthropic_takes(schema: dict[str, Any]) -> bool:
    try:
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        return AnthropicConfig.native_output_schema(schema) is not None
    except Exception:  # litellm moved it: do not risk a refused call
        return False


# What Gemini's responseJsonSchema takes (ai.google.dev, GenerationConfig.responseJsonSchema).
_GEMINI_SCHEMA_KEYS = frozenset(
    {
        "type", "format", "title", "description", "enum", "items", "prefixItems", "minItems", "maxItems",
        "minimum", "maximum", "anyOf", "oneOf", "properties", "additionalProperties", "required",
        "propertyOrdering",
    }
)  # fmt: skip


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema in Gemini's subset: ``$ref`` inlined (ours are not recursive; Gemini refuses a
    ``$ref`` with a sibling such as ``description``), unsupported keywords (``default``) dropped."""
    defs = schema.get("$defs") or {}

    def reduce(node: Any, depth: int = 0) -> Any:
        if isinstance(node, list):
            return [reduce(item, depth) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node and depth < 32:
            target = defs.get(str(node["$ref"]).rsplit("/", 1)[-1], {})
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return reduce(merged, depth + 1)
        reduced: dict[str, Any] = {}
        for key, value in node.items():
            if key not in _GEMINI_SCHEMA_KEYS:
                continue
            if key == "properties" and isinstance(value, dict):
                reduced[key] = {name: reduce(sub, depth) for name, sub in value.items()}
            elif key in ("items", "anyOf", "oneOf", "prefixItems", "additionalProperties"):
                reduced[key] = reduce(value, depth)
            else:
                reduced[key] = value
        return reduced

    result = reduce(schema)
    return result if isinstance(result, dict) else {}


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
    """An answer the provider stopped at the output limit is incomplete: say so, by its size; one it
    withheld (content filter, safety) is a permanent error, never an empty extraction."""
    choices = getattr(response, "choices", None) or []
    if choices and getattr(choices[0], "finish_reason", None) == "content_filter":
        # litellm's word for Azure's content filter, Gemini's SAFETY (or a blocked prompt) and
        # Anthropic's refusal: the provider withheld the answer. Asked again, it withholds it again.
        raise PermanentError(
            f"{usage.model} withheld the answer (finish_reason content_filter: the provider's content filter or "
            "safety system stopped it); the document was not extracted",
            usage=usage,
        )
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


def _call_kwargs(litellm: Any, config: LLMConfig, messages: list[dict[str, str]], limit: int | None) -> dict[str, Any]:
    """The arguments of one call, with what the provider needs beyond the OpenAI shape."""
    kwargs: dict[str, Any] = {
        "model": config.effective_model,
        "messages": messages,
        "timeout": config.timeout_seconds,
        "num_retries": 0,
        "max_retries": 0,
        "temperature": 0,
    }
    if limit:
        kwargs["max_tokens"] = limit
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if config.api_key:
        kwargs["api_key"] = config.api_key
    if config.is_offline:
        return kwargs
    provider = _provider(litellm, config)
    if provider in CACHE_MARK_PROVIDERS or (
        provider in ("vertex_ai", "bedrock") and "claude" in config.effective_model
    ):
        kwargs["messages"] = with_cache_marks(messages)
    if provider in ("ollama", "ollama_chat"):
        # Ollama's window is 4096 tokens unless asked (num_ctx), and it drops what does not fit
        # without a word: the paper would silently lose its beginning.
        kwargs["num_ctx"] = _ollama_window(config, messages, limit)
    return kwargs


# Providers whose prompt cache reads only what the request marks (``cache_control``): Anthropic.
# OpenAI, Azure, Gemini (implicit caching), vLLM and DeepSeek cache a repeated prefix unasked.
CACHE_MARK_PROVIDERS = frozenset({"anthropic"})
_EPHEMERAL = {"type": "ephemeral"}


def with_cache_marks(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """A copy of ``messages`` with Anthropic's cache breakpoints: the system prompt, and the first
    user message's stable prefix (fields, rules, the paper) as its own marked text block, the
    call's own tail (``<THIS_CALL>``) unmarked after it. Every call about a paper (a part, the
    follow-up, the repair, which appends to the same conversation) repeats that prefix and reads
    it from the cache. Two marks of Anthropic's four; the messages given are not changed (the
    answer key and the stored prompt use them)."""
    from extraction_pipeline.core.extraction.markers import split_stable_prefix

    marked: list[dict[str, Any]] = []
    user_marked = False
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str) or not content:
            marked.append(dict(message))
            continue
        if message.get("role") == "system":
            marked.append(
                {**message, "content": [{"type": "text", "text": content, "cache_control": dict(_EPHEMERAL)}]}
            )
        elif message.get("role") == "user" and not user_marked:
            user_marked = True
            prefix, tail = split_stable_prefix(content)
            # The cache matches blocks exactly: the blank line before <THIS_CALL> goes with the
            # tail, so the first call (no tail) and the follow-up mark the very same prefix.
            stable = prefix.rstrip()
            tail = prefix[len(stable) :] + tail
            blocks: list[dict[str, Any]] = [{"type": "text", "text": stable, "cache_control": dict(_EPHEMERAL)}]
            if tail.strip():  # Anthropic refuses a text block of only whitespace
                blocks.append({"type": "text", "text": tail})
            marked.append({**message, "content": blocks})
        else:
            marked.append(dict(message))
    return marked


def _ollama_window(config: LLMConfig, messages: list[dict[str, str]], limit: int | None) -> int:
    """The context to ask Ollama for: the configured window, else litellm's figure for the model,
    else what this prompt and its answer need (counted, with a margin)."""
    if config.context_tokens:
        return int(config.context_tokens)
    try:
        known = _import_litellm().get_model_info(config.effective_model).get("max_input_tokens")
    except Exception:
        known = None
    if known:
        return int(known)
    needed = max(count_tokens(config, messages), -(-sum(len(str(m.get("content") or "")) for m in messages) // 3))
    return int(needed * 1.1) + (limit or 8192)


def complete_json(config: LLMConfig, messages: list[dict[str, str]]) -> tuple[str, Usage]:
    """One call asking for a JSON object (no schema, no repair): (content, usage). Raises
    TransientError / PermanentError as classified; the caller validates the content."""
    litellm = _import_litellm()
    _check_context_window(litellm, config, messages)
    limit = output_limit(config)
    kwargs = _call_kwargs(litellm, config, messages, limit)
    kwargs["response_format"] = {"type": "json_object"}
    response = _completion(litellm, config, kwargs, messages)
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
        kwargs = _call_kwargs(litellm, config, conversation, limit)
        if not config.is_offline:
            kwargs["response_format"] = _response_format(litellm, config, template)
        return _completion(litellm, config, kwargs, conversation)

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
