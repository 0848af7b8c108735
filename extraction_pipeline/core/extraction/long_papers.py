"""Papers longer than the model's context window: extracted in parts, merged.

Why parts and not a refusal: the papers that overflow a context window (clinical study reports,
theses, long supplements) are exactly the ones a reviewer least wants to read by hand, and
refusing would lose them. Why not truncation: the outcomes are usually late in a report. So the
pages are split, in order, into as few parts as fit the window (each part carries the same
instructions and its own pages' tables); each part is asked for what its pages report; every
answer is grounded against the *whole* document; and the answers are merged:

- a single-valued field (study metadata, baseline, Risk of Bias, project fields) keeps the best
  grounded answer over the parts (a verified value over an approximate one, any value over none,
  the earlier part on a tie);
- repeated entries (arms, outcome results, comparisons) are concatenated, and entries about the
  same thing (``core.extraction.entries``: an arm of the same name and subgroup; an outcome result
  of the same outcome, arm, time point and population; a comparison of the same outcome, arms and
  time point) are merged into one (field by field, by the same rule), so an arm declared in the
  methods and again in the results is one arm, and an outcome reported in the abstract and again
  in the results is one result per arm. Outcome entries and comparisons name their arms, so
  renumbering the arms changes no reference.

A single page larger than the window, or a paper that would need more than ``MAX_PARTS`` calls,
is refused with the reason: splitting inside a page would cut tables and sentences apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.extraction.entries import EntryKey, entry_key, entry_location, has_identity
from extraction_pipeline.core.extraction.grounded import GroundedFields, GroundedValue
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.llm.gateway import LLMConfig, context_limit, count_tokens, prompt_room
from extraction_pipeline.core.pdf.model import ParsedDocument, ParsedTable
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.verification.grounding import (
    APPROXIMATE,
    JUDGEMENT_APPROXIMATE,
    JUDGEMENT_SUPPORTED,
    NOT_REPORTED,
    VERIFIED,
)

MAX_PARTS = 12
MARGIN_TOKENS = 256  # the token count of a part is an estimate until its prompt is built
_RANK: dict[str, int] = {VERIFIED: 0, JUDGEMENT_SUPPORTED: 1, APPROXIMATE: 2, JUDGEMENT_APPROXIMATE: 3}


@dataclass(frozen=True)
class Part:
    first_page: int  # 1-based, inclusive
    last_page: int

    def tables(self, parsed: ParsedDocument) -> list[ParsedTable]:
        return [t for t in parsed.tables if self.first_page <= t.page <= self.last_page]

    def messages(
        self,
        template: TemplateDefinition,
        parsed: ParsedDocument,
        k: int,
        n: int,
        only: TemplateDefinition | None = None,
    ) -> list[dict[str, str]]:
        return build_messages(
            template,
            parsed.pages_text[self.first_page - 1 : self.last_page],
            self.tables(parsed),
            first_page=self.first_page,
            part=(k, n),
            only=only,
        )

    @property
    def label(self) -> str:
        return f"{self.first_page}-{self.last_page}" if self.last_page != self.first_page else str(self.first_page)


def plan_parts(template: TemplateDefinition, parsed: ParsedDocument, llm: LLMConfig) -> list[Part] | None:
    """None when the whole paper fits the model's window (or the window is unknown); else the
    parts, each fitting it. PermanentError with the reason when no split can fit."""
    limit = context_limit(llm)
    if not limit or count_tokens(llm, build_messages(template, parsed.pages_text, parsed.tables)) <= limit:
        return None
    fixed = count_tokens(llm, build_messages(template, [], [], part=(1, 1)))
    budget = limit - fixed - MARGIN_TOKENS
    sizes = []
    for number, text in enumerate(parsed.pages_text, start=1):
        tables = "\n\n".join(t.html for t in parsed.tables if t.page == number)
        page_prompt = [{"role": "user", "content": f"[page {number}]\n{text}\n\n{tables}"}]
        sizes.append(count_tokens(llm, page_prompt))
        if sizes[-1] > budget:
            raise PermanentError(
                f"page {number} alone needs about {sizes[-1] + fixed} prompt tokens but {llm.effective_model} "
                f"accepts {prompt_room(llm)}: the paper cannot be split into parts that fit; use a model with a larger "
                "context window"
            )
    parts: list[Part] = []
    start, used = 1, 0
    for number, size in enumerate(sizes, start=1):
        if used + size > budget and number > start:
            parts.append(Part(start, number - 1))
            start, used = number, 0
        used += size
    parts.append(Part(start, len(sizes)))
    parts = _fit(template, parsed, llm, limit, parts)
    if len(parts) > MAX_PARTS:
        raise PermanentError(
            f"the paper needs {count_tokens(llm, build_messages(template, parsed.pages_text, parsed.tables))} "
            f"prompt tokens: {len(parts)} parts of {limit} for {llm.effective_model}, more than the {MAX_PARTS} "
            "allowed; use a model with a larger context window"
        )
    return parts


def _fit(
    template: TemplateDefinition, parsed: ParsedDocument, llm: LLMConfig, limit: int, parts: list[Part]
) -> list[Part]:
    """Check each part's real prompt; split any that the estimate let grow past the window."""
    fitted: list[Part] = []
    pending = list(parts)
    while pending:
        part = pending.pop(0)
        too_big = count_tokens(llm, part.messages(template, parsed, 1, 1)) > limit
        if not too_big or part.first_page == part.last_page:
            fitted.append(part)  # a single page was measured alone above
            continue
        middle = (part.first_page + part.last_page) // 2
        pending[:0] = [Part(part.first_page, middle), Part(middle + 1, part.last_page)]
    return fitted


def _rank(entry: GroundedValue) -> tuple[int, int]:
    if entry.value is None:
        return (9, 0) if entry.status == NOT_REPORTED else (8, 0)
    return _RANK.get(entry.status, 5), 0


def better_grounded(new: GroundedValue, old: GroundedValue | None) -> bool:
    """Whether ``new`` should replace ``old`` when two answers give one field (verified over
    approximate, any value over none)."""
    return old is None or _rank(new) < _rank(old)


def key_text(entry: GroundedValue | None) -> str:
    """An outcome's name or timepoint as entries are matched by it: lower case, words only."""
    value = entry.value if entry else None
    return " ".join(re.findall(r"[a-z0-9]+", str(value).lower())) if value is not None else ""


def merge_parts(answers: list[GroundedFields]) -> GroundedFields:
    """One grounded result from the grounded results of the parts (see the module's rules)."""
    merged: GroundedFields = {}
    entries: list[tuple[str, EntryKey, dict[str, GroundedValue]]] = []  # (module, key, {field: entry}) in order
    for grounded in answers:
        groups: dict[tuple[str, int], dict[str, GroundedValue]] = {}
        for path, entry in grounded.items():
            location = entry_location(path, entry)
            if location is None:
                if better_grounded(entry, merged.get(path)):
                    merged[path] = entry
                continue
            groups.setdefault(location, {})[entry.field] = entry
        for (module, _index), group in sorted(groups.items(), key=lambda item: item[0][1]):
            if all(entry.value is None for entry in group.values()):
                continue  # an empty entry says nothing
            key = entry_key(module, group)
            same = next(
                (
                    fields
                    for other_module, other_key, fields in entries
                    if other_module == module and has_identity(module) and key.named and key.same(other_key)
                ),
                None,
            )
            if same is None:
                entries.append((module, key, dict(group)))
                continue
            for field, entry in group.items():
                if better_grounded(entry, same.get(field)):
                    same[field] = entry
    counters: dict[str, int] = {}
    for module, _key, fields in entries:
        counters[module] = counters.get(module, 0) + 1
        for field, entry in fields.items():
            merged[f"{module}.{counters[module]}.{field}"] = replace(entry, index=counters[module])
    return merged
