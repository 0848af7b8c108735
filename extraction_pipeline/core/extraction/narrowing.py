"""Smaller questions about a paper: the template narrowed to some of its modules.

An answer too long for one call is asked again module by module, and the follow-up question asks
for outcomes only. A template that speaks in arms cannot be cut anywhere, though: outcome entries
and comparisons name their arms by the names the ``arms`` module declares, and a model asked for
outcomes alone would name arms no answer declares. So a module that names arms (it has an ``arm``
field) is always asked together with the arms; the arms are not asked on their own, as each of
those questions declares them, and the answers' arms are merged by name
(``core.extraction.long_papers.merge_parts``, ``core.extraction.follow_up.merge_answered``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from extraction_pipeline.core.templates.arms import ARMS_MODULE, has_arms
from extraction_pipeline.core.templates.definition import ModuleDef, TemplateDefinition

OUTCOMES_MODULE = "outcomes"


@dataclass(frozen=True)
class Narrowed:
    """One smaller question: what it is called in notes and messages, and the template it asks."""

    label: str
    template: TemplateDefinition


def names_arms(module: ModuleDef) -> bool:
    """Whether the module's entries refer to declared arms by name."""
    return module.name != ARMS_MODULE and any(spec.name == "arm" for spec in module.fields)


def with_arms(template: TemplateDefinition, names: tuple[str, ...]) -> TemplateDefinition:
    """The template asked for the modules ``names`` only (no project fields), plus the arms when
    the template declares arms and one of those modules names them."""
    wanted = set(names)
    chosen = [module for module in template.modules if module.name in wanted]
    if has_arms(template) and any(names_arms(module) for module in chosen):
        wanted.add(ARMS_MODULE)
    return replace(template, modules=tuple(m for m in template.modules if m.name in wanted), custom_fields=())


def module_questions(template: TemplateDefinition) -> list[Narrowed]:
    """The template module by module (the project's fields as one more question), each module
    that names arms asked with the arms; the arms alone only when no module names them."""
    arms_asked_with_others = has_arms(template) and any(names_arms(m) for m in template.modules)
    questions = []
    for module in template.all_modules():
        if module.name == ARMS_MODULE and arms_asked_with_others:
            continue
        if has_arms(template) and names_arms(module) and module in template.modules:
            questions.append(Narrowed(f"{module.name} with {ARMS_MODULE}", with_arms(template, (module.name,))))
        else:
            questions.append(Narrowed(module.name, template.only(module.name)))
    return questions


def outcomes_question(template: TemplateDefinition) -> TemplateDefinition:
    """What the follow-up question asks for: the outcomes; in a template with arms, the outcome
    results with the arms they name and the comparisons between them (version 1's outcome entries
    held the between-arm effect themselves)."""
    if not has_arms(template):
        return template.only(OUTCOMES_MODULE)
    return with_arms(template, tuple(m.name for m in template.modules if names_arms(m)))
