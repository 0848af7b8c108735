"""Tests of the domain (`extraction_pipeline/core`): the ledger on SQLite and PostgreSQL, parsing,
grounding, extraction through litellm against the loopback fake, review, export."""
