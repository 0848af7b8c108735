"""Tests of the Dagster wiring (`extraction_pipeline/defs`) against a real instance
(`instance_for_test`, or PostgreSQL storage)."""
