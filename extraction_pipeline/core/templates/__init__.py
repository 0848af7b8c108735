"""Extraction templates: the built-in RCT base, project custom fields, versions frozen per batch."""

from extraction_pipeline.core.templates.definition import FieldDef, FieldType, ModuleDef, TemplateDefinition
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline.core.templates.schema import ExtractedValue, extracted_values, output_json_schema, output_model

__all__ = [
    "RCT_TEMPLATE",
    "ExtractedValue",
    "FieldDef",
    "FieldType",
    "ModuleDef",
    "TemplateDefinition",
    "extracted_values",
    "output_json_schema",
    "output_model",
]
