"""Extraction templates: the built-in RCT base, project custom fields, versions frozen per batch.

The pydantic output models live in ``schema`` and are imported from there, not re-exported here:
commands that only read or freeze a template (``batch create``) should not pay for pydantic.
"""

from extraction_pipeline.core.templates.definition import FieldDef, FieldType, ModuleDef, TemplateDefinition
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE

__all__ = [
    "RCT_TEMPLATE",
    "FieldDef",
    "FieldType",
    "ModuleDef",
    "TemplateDefinition",
]
