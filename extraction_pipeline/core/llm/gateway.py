"""One structured-output call through litellm: JSON mode, pydantic validation, one repair attempt.

litellm's own retries are disabled (``num_retries=0``, ``max_retries=0``): retry policy belongs to
the orchestrator, which backs off with jitter and keeps the ledger honest between attempts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from extraction_pipeline.core.errors import OutputParseError, PermanentError, TransientError
from extraction_pipeline.core.llm.classify import classify
from extraction_pipeline.core.llm.offline import OFFLINE_MODEL, OFFLINE_PROVIDER, register_offline_provider
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.templates.schema import output_json_schema, output_model
from extraction_pipeline.core.usage import Usage

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class LLMConfig:
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never printed
    timeout_seconds: float = 120.0
    context_tokens: int | None = None  # the prompt limit; None: litellm's figure for the model
    # Entered around each paid call: holds one of the provider's concurrency slots for exactly the
    # call (the orchestrator supplies it; None: no limit here).
    call_gate: Callable[[], AbstractContextManager[None]] | None = field(default=None, repr=False, compare=False)

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
    """How many prompt tokens the model takes: the configured limit, else litellm's figure for
    the model; None when neither is known (the provider then judges, and a context-length error
    is classified permanent)."""
    if config.is_offline:
        return None
    if config.context_tokens:
        return config.context_tokens
    try:
        limit = _import_litellm().get_model_info(config.effective_model).get("max_input_tokens")
    except Exception:
        return None
    return int(limit) if limit else None


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
            f"document needs {needed} prompt tokens but {config.effective_model} accepts {limit}; "
            "it was not truncated: use a model with a larger context window"
        )


def _completion(litellm: Any, config: LLMConfig, kwargs: dict[str, Any]) -> Any:
    """One paid call, inside the call gate when there is one (the gate's own failures, such as a
    lost database, are not the provider's and are not classified as such)."""
    gate = config.call_gate() if config.call_gate is not None and not config.is_offline else nullcontext()
    with gate:
        try:
            return litellm.completion(**kwargs)
        except Exception as exc:
            raise classify(exc) from exc


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
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if config.api_key:
        kwargs["api_key"] = config.api_key
    response = _completion(litellm, config, kwargs)
    return response.choices[0].message.content or "", _usage_of(litellm, response, config)


def complete_extraction(config: LLMConfig, messages: list[dict[str, str]], template: TemplateDefinition) -> LLMResult:
    """Ask the model for an answer shaped by ``template``. Raises TransientError /
    PermanentError / OutputParseError (after one repair attempt)."""
    litellm = _import_litellm()
    if config.is_offline:
        register_offline_provider()

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
        if config.api_base:
            kwargs["api_base"] = config.api_base
        if config.api_key:
            kwargs["api_key"] = config.api_key
        return _completion(litellm, config, kwargs)

    _check_context_window(litellm, config, messages)
    response = call(messages)
    usage = _usage_of(litellm, response, config)
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
        usage = usage + _usage_of(litellm, response, config)
        repaired = response.choices[0].message.content
        try:
            return LLMResult(_parse(repaired, template), usage, repaired=True, content=repaired or "")
        except (ValueError, ValidationError) as second_error:
            raise OutputParseError(
                f"model output is not valid JSON for the schema after one repair: {str(second_error)[:300]}",
                original=second_error,
                usage=usage,
            ) from second_error
