"""Pure domain logic. Never imports dagster (enforced by extraction_pipeline_tests/test_layering.py)."""
