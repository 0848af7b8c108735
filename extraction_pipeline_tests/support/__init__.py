"""Helpers the tests share: fakes, corpus oracles, ledgers and Dagster runs to test with."""
