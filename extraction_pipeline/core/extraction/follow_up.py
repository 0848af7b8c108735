"""The recall check after an answer, and the targeted second question it may lead to.

Every document's answer is checked for what the paper reports and no extracted value covers
(``core.verification.recall``); the list is stored with the result, so the review page and the
workbook show it. When the batch asks for it (``batch create --follow-up``), the outcomes on that
list (whole outcomes, and outcomes with numbers no value reads) and the extracted outcomes missing
a number their other numbers imply (or, arms declared, an arm without the numbers other arms have)
are asked for in one more call to the same model: the outcomes part of the template (with arms:
the arms, the outcome results per arm and the comparisons, so the answer can name its arms), the
whole paper, and the outcome names, each with its page and what the paper prints there (the
names alone when only they fit the model's window). That call is paid once like every call (a
stored answer to the same prompt is reused), its answer is grounded like every answer, and
its entries are added to the result (``merge_answered``: the first answer's entries stay as they
are; an answered entry completes one entry about the same outcome, arm and time point (an arm of
the same name) it does not contradict, else it is appended). Outcomes it added are marked as
found by the follow-up. The list is then checked again, so it shows what is still missing.

A follow-up that fails for a reason of its own (its answer cut at the output limit, an answer that
does not parse) is recorded and the first answer kept: a document is never lost to an optional
question. Transient errors propagate, as for every call, and the retry reuses what was paid for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import select

from extraction_pipeline.core.errors import PermanentError
from extraction_pipeline.core.evaluation.matching import normalize_name
from extraction_pipeline.core.extraction.entries import EntryKey, entry_key, has_identity, key_fields, repeated_entries
from extraction_pipeline.core.extraction.grounded import GroundedFields, GroundedValue, add_checks, ground_entries
from extraction_pipeline.core.extraction.long_papers import better_grounded
from extraction_pipeline.core.extraction.narrowing import OUTCOMES_MODULE, outcomes_question
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.schema import batch_items, batches
from extraction_pipeline.core.llm.gateway import LLMResult
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.templates.arms import RESULT_FIELDS, Outcome, StudyArms, study_arms
from extraction_pipeline.core.templates.definition import TemplateDefinition
from extraction_pipeline.core.usage import Usage
from extraction_pipeline.core.verification.grounding import Grounder
from extraction_pipeline.core.verification.recall import MissedKind, PossiblyMissed, possibly_missed
from extraction_pipeline.core.verification.recall_items import labelled_excerpts

# The reviewer's list is short (the check's ten likeliest rows), but a model can be asked about
# more in the same one call: the follow-up asks about the check's longer list, at most MAX_LABELS
# rows (an item for a table's unread rows names each row), each by its name.
MAX_LABELS = 60

# How the follow-up's call is made: the assembly's ``_answer`` (reuse of a paid answer, the audit
# log, the meter), given the messages and the template they ask for.
Ask = Callable[[list[dict[str, str]], TemplateDefinition], tuple[LLMResult, dict[str, Any] | None]]


@dataclass(frozen=True)
class Checked:
    """The fields after the recall check (and the follow-up, when asked), the list of what may
    still be missing, and what the follow-up did (None when none was asked)."""

    fields: GroundedFields
    missed: list[PossiblyMissed] | None  # None: the check itself failed (``notes`` says why)
    follow_up: dict[str, Any] | None = None
    usage: Usage | None = None  # the follow-up's call, when one was made
    notes: list[str] = field(default_factory=list)


def follows_up(ledger: Ledger, item_id: int) -> bool:
    """Whether the item's batch asks the follow-up question."""
    query = select(batches.c.follow_up).join(batch_items, batch_items.c.batch_id == batches.c.id)
    with ledger.engine.connect() as conn:
        value = conn.execute(query.where(batch_items.c.id == item_id)).scalar()
    return bool(value)


def check_recall(
    fields: GroundedFields,
    parsed: ParsedDocument,
    template: TemplateDefinition,
    *,
    follow_up: bool,
    whole_paper_fits: bool,
    ask: Ask,
    fits: Callable[[list[dict[str, str]]], bool] | None = None,
) -> Checked:
    """The recall check on ``fields``, and the follow-up question when ``follow_up`` is set and
    the check lists outcomes (only for a paper asked whole: a paper in parts is not asked again).
    ``fits`` tells whether a prompt fits the model's window (None: no window to respect): the
    outcomes are asked with their places when they fit, by their names alone when only those do."""
    try:
        missed = possibly_missed(parsed, fields)
    except Exception as exc:  # a heuristic's bug must not cost a paid, grounded answer
        note = f"recall check failed, nothing listed: {type(exc).__name__}: {exc}"
        return Checked(fields, None, notes=[note])
    outcomes = next((m for m in template.modules if m.name == OUTCOMES_MODULE), None)
    incomplete = incomplete_outcomes(fields)
    if not follow_up or not (missed or incomplete) or outcomes is None:
        return Checked(fields, missed)
    try:
        missed_lines, asked = _asked_lines(parsed, fields, incomplete)
    except Exception as exc:  # a heuristic's bug must not cost a paid, grounded answer
        note = f"follow-up not asked: listing its outcomes failed: {type(exc).__name__}: {exc}"
        return Checked(fields, missed, notes=[note])
    if not asked:
        return Checked(fields, missed)
    if not whole_paper_fits:
        note = "follow-up not asked: the paper is too long for one call, so it was asked in parts"
        return Checked(fields, missed, {"asked": asked, "found": [], "skipped": note}, notes=[note])
    narrowed = outcomes_question(template)
    # The batch's template first (the prompt the first answer repeated, read from the cache), the
    # narrower question in this call's own part.
    messages = build_messages(template, parsed.pages_text, parsed.tables, missed=missed_lines, only=narrowed)
    if fits is not None and not fits(messages):
        # A paper that nearly fills the model's window: the places do not fit beside it, the names may.
        messages = build_messages(template, parsed.pages_text, parsed.tables, missed=asked, only=narrowed)
    try:
        reply, reused = ask(messages, narrowed)
    except PermanentError as exc:  # a cut or unreadable answer, a refused prompt
        note = f"follow-up failed, the first answer is kept: {exc}"
        spent: Usage | None = exc.usage if isinstance(exc.usage, Usage) else None  # paid for, even if unusable
        return Checked(fields, missed, {"asked": asked, "found": [], "failed": str(exc)}, spent, [note])
    answered = ground_entries(narrowed, reply.output, Grounder(parsed))
    merged, found = merge_answered(fields, answered, parsed)
    usage = reply.usage
    record = {
        "asked": asked,
        "found": found,
        "model": usage.model,
        "tokens_in": usage.tokens_in,
        "tokens_out": usage.tokens_out,
        "cost_usd": usage.cost_usd,
        "reused": reused is not None,
    }
    try:
        still = possibly_missed(parsed, merged)
    except Exception as exc:  # the paid follow-up's answer is kept, unchecked
        note = f"recall check after the follow-up failed, nothing listed: {type(exc).__name__}: {exc}"
        return Checked(merged, None, record, usage, [note])
    return Checked(merged, still, record, usage)


def _asked_lines(parsed: ParsedDocument, fields: GroundedFields, incomplete: list[str]) -> tuple[list[str], list[str]]:
    """What the follow-up asks: one line per place (at most ``MAX_LABELS``), and the outcomes'
    names, each once. Whole outcomes first, then extracted outcomes with an arm's number missing
    where the other arm has it (a number the model dropped, whatever the paper's layout), then
    outcomes with numbers no value reads (a half-read row): asked again whole, their answer fills
    only the entry's empty or worse fields."""
    longer = possibly_missed(parsed, fields, limit=MAX_LABELS, likeliest_first=True)  # names cut likeliest last
    # An item found at one place for several outcomes (a table's unread rows) names each of them,
    # each with its page and what the paper prints for it there: a row's label alone may be
    # ambiguous ("Total", "At week 8"), its numbers are not.
    whole = [where for m in longer if m.kind == MissedKind.OUTCOME for where in _places(m)]
    rest = [where for m in longer if m.kind != MissedKind.OUTCOME for where in _places(m)]
    # One line per place: a label printed at two places ("global HRQoL" at 3 and at 12 months) is
    # asked at both.
    lines = {line or label: label for label, line in [*whole, *((" ".join(n.split()), "") for n in incomplete), *rest]}
    missed_lines = [line for line, label in lines.items() if label][:MAX_LABELS]
    return missed_lines, list(dict.fromkeys(lines[line] for line in missed_lines))


def _places(item: PossiblyMissed) -> list[tuple[str, str]]:
    """(label, the asked line) for each outcome ``item`` names: 'label (page 6: "what it prints")'."""
    return [(label, f'{label} (page {item.page}: "{excerpt}")') for label, excerpt in labelled_excerpts(item)]


# Numbers reported per arm. An outcome with one arm's number and not another's is incomplete; so
# are events without the group's total, a mean without its SD or its group's size, and (arms
# declared) an arm with no numbers for an outcome other arms of its subgroup have numbers for.
_PER_ARM = RESULT_FIELDS
_GOES_WITH = {"events": ("total",), "mean": ("sd", "n")}


def incomplete_outcomes(fields: GroundedFields) -> list[str]:
    """Names of extracted outcomes missing a number their other numbers say is reported (see
    ``_PER_ARM`` and ``_GOES_WITH``), in outcome order: the model likely dropped it. Read through
    ``study_arms``, so version 1's two-arm entries and version 2's entries per arm alike."""
    study = study_arms(fields, lambda path: fields[path].value)
    incomplete = []
    for outcome in study.outcomes:
        if not outcome.name:
            continue
        kinds = [
            {kind for kind, path in result.paths.items() if kind in _PER_ARM and path in fields and fields[path].found}
            for result in outcome.results
        ]
        reported = set().union(*kinds) if kinds else set()
        one_arm = any(have != reported for have in kinds)
        unpaired = any(
            kind in have and partner not in have
            for have in kinds
            for kind, partners in _GOES_WITH.items()
            for partner in partners
        )
        if one_arm or unpaired or _arm_left_out(study, outcome, kinds):
            incomplete.append(outcome.name)
    return list(dict.fromkeys(incomplete))


def _arm_left_out(study: StudyArms, outcome: Outcome, kinds: list[set[str]]) -> bool:
    """A declared arm without numbers for ``outcome`` while another arm of its subgroup has some
    (version 2; version 1's two arms are checked number by number)."""
    if study.version == 1:
        return False
    with_numbers = {result.arm for result, have in zip(outcome.results, kinds, strict=True) if have and result.arm}
    subgroups = {arm.subgroup for arm in study.arms if arm.key in with_numbers}
    return bool(with_numbers) and any(arm.key not in with_numbers and arm.subgroup in subgroups for arm in study.arms)


def merge_answered(
    fields: GroundedFields, answered: GroundedFields, parsed: ParsedDocument | None = None
) -> tuple[GroundedFields, list[int]]:
    """The first answer's fields with the follow-up's entries added: the first answer's entries
    are kept exactly as they are (two of its outcomes may share a name: two comparisons, two
    subgroups); an answered entry about the same thing as one of them (``core.extraction.entries``:
    an outcome's name, arm, time point and population, a time point or population only one of them
    gives not telling them apart; an arm's name; a comparison's outcome and arms) only fills or
    improves that entry's fields; any other is appended with the next number. Returns the fields
    and the numbers of the appended outcome entries. The plausibility checks run on what changed."""
    merged = dict(fields)
    firsts = repeated_entries(fields)
    changed: set[str] = set()
    found: list[int] = []
    for module, answered_groups in repeated_entries(answered).items():
        if not has_identity(module):
            continue
        # The answer's own appended entries are matched like the first answer's: two of its
        # entries with one name and arm but other numbers (two columns of one row) are two entries.
        groups = dict(firsts.get(module, {}))
        keys = {index: _entry_key(module, group) for index, group in groups.items()}
        next_index = max(groups, default=0) + 1
        taken: set[int] = set()  # entries an answered entry already went to: one each
        for _number, group in answered_groups.items():
            if all(entry.value is None for entry in group.values()):
                continue  # an empty entry says nothing
            key = _entry_key(module, group)
            same = _entry_for(module, group, key, keys, groups, taken)
            if same is not None:
                taken.add(same)
            target = same if same is not None else next_index
            for name, entry in group.items():
                path = f"{module}.{target}.{name}"
                if same is None or better_grounded(entry, merged.get(path)):
                    merged[path] = replace(entry, module=module, index=target)
                    changed.add(path)
            if same is None:
                keys[target] = key
                groups[target] = group
                if module == OUTCOMES_MODULE:
                    found.append(target)
                next_index += 1
    checked = add_checks(merged, parsed)
    return {path: checked[path] if path in changed else entry for path, entry in merged.items()}, found


def _entry_for(
    module: str,
    group: dict[str, GroundedValue],
    key: EntryKey,
    keys: dict[int, EntryKey],
    groups: dict[int, dict[str, GroundedValue]],
    taken: set[int],
) -> int | None:
    """The first answer's entry an answered entry completes: about the same thing (loosely: a
    time point only one gives does not differ), not yet completed by another answered entry, and
    whose values it does not contradict (a number the entry has that the answer gives differently
    means another outcome of that name: a subgroup, another comparison); of those, the one it
    agrees with most. None: a new entry."""
    best, best_agree = None, -1
    described = set(key_fields(module))
    for index, known in keys.items():
        if index in taken or not key.named or not key.same(known, loose=True):
            continue
        entry = groups.get(index, {})
        agree = conflict = 0
        for name, answered in group.items():
            have = entry.get(name)
            if name in described or answered.value is None or have is None or have.value is None:
                continue
            if _same_value(have.value, answered.value):
                agree += 1
            else:
                conflict += 1
        if not conflict and agree > best_agree:
            best, best_agree = index, agree
    return best


def _same_value(a: object, b: object) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return abs(float(a) - float(b)) < 1e-9
    return " ".join(str(a).split()).lower() == " ".join(str(b).split()).lower()


def _entry_key(module: str, group: dict[str, GroundedValue]) -> EntryKey:
    """An entry as the follow-up's answer is matched to the first answer's: an outcome's name as
    ``evaluate`` compares names (spelling, abbreviations, timepoints in the name dropped), the
    rest as ``core.extraction.entries`` compares them."""
    key = entry_key(module, group)
    name = group.get("outcome_name")
    if name is None or name.value is None or not key.identity:
        return key
    return replace(key, identity=(normalize_name(str(name.value)), *key.identity[1:]))


def found_by_follow_up(result: dict[str, Any]) -> set[int]:
    """The outcome numbers the follow-up question added to a stored result."""
    follow = result.get("follow_up") or {}
    return {int(n) for n in follow.get("found") or []}
