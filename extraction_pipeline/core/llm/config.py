"""What a model call is configured with (``LLMConfig``), and the model's limits read from it or
from litellm's model map: its context window, what of it the prompt may take, its output limit,
and a prompt's token count."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from extraction_pipeline.core.llm.litellm_loader import import_litellm
from extraction_pipeline.core.llm.offline import OFFLINE_MODEL, OFFLINE_PROVIDER


class CallBudget(Protocol):
    """The provider's token and request budget, spent call by call (core/ledger/budgets.py keeps
    it for the whole instance). ``before_call`` blocks until the call fits (``tokens`` is asked
    only when a limit is known: counting loads a tokenizer); the others report what the provider
    then counted and said, and ``waiting_out`` that a refused call waits ``seconds`` to be sent
    again (its reservation was given back in ``after_refusal``, which says how long a rate limit
    that gave no ``Retry-After`` is waited out)."""

    def before_call(self, model: str, tokens: Callable[[], int], output_tokens: int = 0) -> Any: ...

    def output_cap(self, model: str) -> int | None:
        """The most output tokens one call may ask for (a provider that meters output per minute
        from each call's ``max_tokens``); None: no such limit known."""
        ...

    def after_call(
        self, reservation: Any, used_tokens: int | None, headers: Any, used_output: int | None = None
    ) -> None: ...

    def after_refusal(
        self, reservation: Any, retry_after: float | None, headers: Any, *, rate_limited: bool = False
    ) -> float | None:
        """Told of a failed call; for a rate limit without a ``Retry-After``, returns how long to
        wait (from the answer's reset headers or the learned budget)."""
        ...

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
    # Keys and endpoints per provider ("openai") or model ("openai/gpt-4o-mini"), for the models a
    # batch uses besides ``model`` (a second model, an adjudicator, a provider batch submitted with
    # another model): ``for_model`` picks them. Never printed.
    keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    bases: tuple[tuple[str, str], ...] = ()

    @property
    def effective_model(self) -> str:
        return self.model or OFFLINE_MODEL

    def for_model(self, model: str) -> LLMConfig:
        """This configuration for ``model``: its key and endpoint from ``keys`` and ``bases`` (the
        model's own entry, else its provider's), else ``api_key`` and ``api_base`` when ``model``
        is served by the same provider as this configuration's model, else none (litellm and the
        SDKs then read the provider's own variables, ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``...).
        One provider's key is never sent to another."""
        if model == self.model:
            return self
        own = provider_of(self.effective_model)
        same = provider_of(model) == own
        key = _entry(self.keys, model)
        base = _entry(self.bases, model)
        return replace(
            self,
            model=model,
            api_key=key if key is not None else (self.api_key if same else None),
            api_base=base if base is not None else (self.api_base if same else None),
            # This model's own key and endpoint stay known for a way back (a config made from this one).
            keys=_with(self.keys, own, self.api_key),
            bases=_with(self.bases, own, self.api_base),
        )

    @property
    def is_offline(self) -> bool:
        return self.effective_model.startswith(f"{OFFLINE_PROVIDER}/")


def provider_of(model: str) -> str:
    """The provider serving a litellm model string: its prefix ("anthropic/claude-..."), else
    litellm's reading of a bare name ("gpt-4o" is OpenAI's)."""
    if "/" in model:
        return model.split("/", 1)[0].lower()
    try:
        return str(import_litellm().get_llm_provider(model=model)[1]).lower()
    except Exception:
        return ""


def _with(entries: tuple[tuple[str, str], ...], name: str, value: str | None) -> tuple[tuple[str, str], ...]:
    if not value or not name or any(known == name for known, _ in entries):
        return entries
    return (*entries, (name, value))


def _entry(entries: tuple[tuple[str, str], ...], model: str) -> str | None:
    found = dict(entries)
    return found.get(model) or found.get(provider_of(model))


def model_info(config: LLMConfig) -> dict[str, Any] | None:
    """litellm's model map entry for the config's model (None: a model it does not know)."""
    try:
        return dict(import_litellm().get_model_info(config.effective_model))
    except Exception:
        return None


def context_limit(config: LLMConfig) -> int | None:
    """How many prompt tokens the model takes: its window (configured, else litellm's figure for
    the model) less the answer's limit, which providers count inside the same window; None when
    the window is not known (the provider then judges, and a context-length error is classified
    permanent)."""
    if config.is_offline:
        return None
    window = config.context_tokens or (model_info(config) or {}).get("max_input_tokens")
    if not window:
        return None
    return int(window) - _kept_for_answer(config, int(window))


def _kept_for_answer(config: LLMConfig, window: int) -> int:
    # A model that can think is kept room for it, asked or not: the window must hold the prompt
    # and the whole max_tokens a call may send.
    answer = output_limit(config, thinking=supports_reasoning(config)) or 0
    return answer if answer < window // 2 else 0  # a limit that large is not the window's share


def prompt_room(config: LLMConfig) -> str:
    """The prompt limit in words, for errors: "111616 prompt tokens (its 128000-token window less
    16384 kept for the answer)"."""
    limit = context_limit(config)
    if limit is None:
        return "an unknown number of prompt tokens"
    kept = _kept_for_answer(config, limit + (output_limit(config, thinking=supports_reasoning(config)) or 0))
    if not kept:
        return f"{limit} prompt tokens"
    return f"{limit} prompt tokens (its {limit + kept}-token window less {kept} kept for the answer)"


# What an answer is given when none is configured: about 2.5 times the longest answer measured on
# the corpus (3,185 tokens). Asking for the model's maximum instead (64,000 for Claude Sonnet 4.5)
# would reserve that much of the account's output budget per call: on an account allowed fewer
# output tokens a minute, every call but the first would wait or be refused. A longer answer is
# cut and asked again in smaller questions.
ANSWER_TOKENS = 8_192
# What a model that thinks before it answers, unasked (OpenAI's reasoning models, Gemini 2.5), may
# spend thinking: its thinking comes out of the same limit, and a limit it spends whole leaves no
# answer at all.
THINKING_TOKENS = 8_192


def output_limit(config: LLMConfig, *, thinking: bool = False) -> int | None:
    """How many tokens an answer may have: the configured limit, else what an answer needs
    (``ANSWER_TOKENS``, plus ``THINKING_TOKENS`` when the model thinks before it answers:
    ``thinking``, which the model's adapter knows, ``ProviderAdapter.thinks``), within litellm's
    figure for the model (``max_output_tokens``); None when neither is known (the provider's
    default applies)."""
    if config.is_offline:
        return None
    if config.output_tokens:
        return config.output_tokens
    info = model_info(config)
    if info is None:
        return None
    most = info.get("max_output_tokens") or info.get("max_tokens")
    if not most:
        return None
    return min(int(most), ANSWER_TOKENS + (THINKING_TOKENS if thinking else 0))


def supports_reasoning(config: LLMConfig) -> bool:
    """litellm's word on whether the model can think before it answers (asked or not)."""
    return not config.is_offline and bool((model_info(config) or {}).get("supports_reasoning"))


def sampling(config: LLMConfig) -> dict[str, Any]:
    """The sampling parameters a call asks for: temperature 0 (the same answer for the same paper)
    where the model takes it, else none. Reasoning models (OpenAI's o-series and gpt-5) take only
    their default temperature and refuse 0 with a 400; litellm's own parameter mapping says which
    models those are, so no model name is listed here."""
    if config.is_offline:
        return {"temperature": 0}
    return {"temperature": 0} if _takes_zero_temperature(config.effective_model) else {}


@functools.lru_cache(maxsize=64)
def _takes_zero_temperature(model: str) -> bool:
    litellm = import_litellm()
    from litellm.utils import get_optional_params

    try:
        name, provider, _, _ = litellm.get_llm_provider(model=model)
        get_optional_params(model=name, custom_llm_provider=provider, temperature=0)
    except litellm.UnsupportedParamsError:
        return False
    except Exception:
        return True  # a model litellm cannot map: the provider judges the ordinary call
    return True


def count_tokens(config: LLMConfig, messages: list[dict[str, str]]) -> int:
    return int(import_litellm().token_counter(model=config.effective_model, messages=messages))


def fits_window(config: LLMConfig, messages: list[dict[str, str]]) -> bool:
    """Whether a prompt fits the model's window (``context_limit``); True when it is not known."""
    limit = context_limit(config)
    return not limit or count_tokens(config, messages) <= limit
