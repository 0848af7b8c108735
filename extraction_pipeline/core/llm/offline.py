"""The built-in offline extractor: pattern-based, no network, no key.

It lets the whole pipeline run on a fresh machine. It is registered as a litellm custom provider
(``offline/pattern-v1``) so it travels the exact code path of a real model, and every value it
returns is labelled with that model name in the ledger and the workbook.
"""

from __future__ import annotations

import json
import re
from typing import Any

OFFLINE_PROVIDER = "offline"
OFFLINE_MODEL = f"{OFFLINE_PROVIDER}/pattern-v1"
# Said wherever its results show up: it exists for demos and tests, not for real papers.
OFFLINE_WARNING = (
    "no model configured: documents are extracted by the built-in offline pattern extractor, which "
    "exists for demos and tests and finds almost nothing in real papers (set EXTRACTION_MODEL and "
    "EXTRACTION_API_KEY)"
)

_NCT = re.compile(r"\bNCT\d{8}\b")
_RANDOMIZED = re.compile(
    r"\b(\d{1,3}(?:,\d{3})*|\d+)\s+(?:patients|participants|subjects|women|men|children|adults)\b"
    r"[^.]{0,80}?\brandomi[sz]ed\b|\brandomi[sz]ed\b[^.]{0,40}?\b(\d{1,3}(?:,\d{3})*|\d+)\s+"
    r"(?:patients|participants|subjects)\b",
    re.IGNORECASE,
)
_EFFECT = re.compile(
    r"\b(HR|OR|RR|hazard ratio|odds ratio|risk ratio|relative risk)\b[^0-9]{0,20}?"
    r"(-?\d+(?:\.\d+)?)\s*[;,(\[]?\s*(?:95\s*%\s*(?:CI|confidence interval))[^0-9-]{0,5}"
    r"(-?\d+(?:\.\d+)?)\s*(?:-|–|—|to|,)\s*(-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_MEASURE_NAMES = {"hazard ratio": "HR", "odds ratio": "OR", "risk ratio": "RR", "relative risk": "RR"}
_SENTENCE_END = re.compile(r"(?<=[.;])\s+(?=[A-Z0-9(])")


def _sentence_around(text: str, start: int, end: int) -> str:
    """The sentence containing text[start:end], copied verbatim (line breaks kept as spaces)."""
    left = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)), default=0)
    right_match = _SENTENCE_END.search(text, end)
    right = right_match.start() if right_match else len(text)
    return re.sub(r"\s+", " ", text[left:right]).strip()


_PAGE_MARKER = re.compile(r"^\[page \d+\]$", re.MULTILINE)


def pattern_extract(document: str, *, comparisons: bool = False) -> dict[str, Any]:
    """An answer in the RCT template's shape with what the patterns find in ``document``: the NCT
    number and randomized total (``metadata``) and the first effect estimate with its 95% CI. Fields
    it cannot find are left out, which the schema reads as null. The effect is one ``outcomes``
    entry in the two-arm template (version 1); asked with ``comparisons`` (a template that speaks
    in arms), it is one ``comparisons`` entry: the patterns cannot tell which arms it compares, so
    it names none, and no outcome entry (an outcome entry holds one arm's numbers).

    Quotes never span the prompt's ``[page N]`` markers: each pattern is searched page by page."""
    found: dict[str, dict[str, Any]] = {}
    for page in _PAGE_MARKER.split(document):
        for name, pair in _extract_page(page).items():
            found.setdefault(name, pair)
    metadata = {name: found[name] for name in ("nct_number", "randomized_n") if name in found}
    effect_fields = ("effect_measure", "effect_estimate", "ci_lower", "ci_upper")
    effects = [{name: found[name] for name in effect_fields}] if "effect_estimate" in found else []
    if comparisons:
        return {"metadata": metadata, "outcomes": [], "comparisons": effects}
    if effects and found["effect_measure"]["value"] == "HR":
        effects[0]["outcome_type"] = {"value": "survival", "quote": found["effect_measure"]["quote"]}
    return {"metadata": metadata, "outcomes": effects}


def asks_for_comparisons(messages: list[Any]) -> bool:
    """Whether the JSON Schema the prompt asks for has a ``comparisons`` list, as a template that
    speaks in arms has."""
    from extraction_pipeline.core.extraction.prompts import asked_schema

    return '"comparisons":' in asked_schema(messages)


def _extract_page(document: str) -> dict[str, dict[str, Any]]:
    fields: dict[str, dict[str, Any]] = {}
    if match := _NCT.search(document):
        fields["nct_number"] = {"value": match.group(0), "quote": _sentence_around(document, *match.span())}
    if match := _RANDOMIZED.search(document):
        number = int((match.group(1) or match.group(2)).replace(",", ""))
        fields["randomized_n"] = {"value": number, "quote": _sentence_around(document, *match.span())}
    if match := _EFFECT.search(document):
        quote = _sentence_around(document, *match.span())
        measure = match.group(1)
        fields["effect_measure"] = {"value": _MEASURE_NAMES.get(measure.lower(), measure.upper()), "quote": quote}
        for name, group in (("effect_estimate", 2), ("ci_lower", 3), ("ci_upper", 4)):
            fields[name] = {"value": float(match.group(group)), "quote": quote}
    return fields


_registered = False


def register_offline_provider() -> None:
    """Register the offline extractor with litellm (idempotent, per process)."""
    global _registered
    if _registered:
        return
    import litellm
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import ModelResponse

    from extraction_pipeline.core.extraction.prompts import document_from_messages

    class OfflinePatternLLM(CustomLLM):
        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
            document = document_from_messages(messages)
            content = json.dumps(pattern_extract(document, comparisons=asks_for_comparisons(messages)))
            return ModelResponse(
                model=OFFLINE_MODEL,
                choices=[{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            )

    litellm.custom_provider_map = [
        item for item in litellm.custom_provider_map if item["provider"] != OFFLINE_PROVIDER
    ] + [{"provider": OFFLINE_PROVIDER, "custom_handler": OfflinePatternLLM()}]
    _registered = True
