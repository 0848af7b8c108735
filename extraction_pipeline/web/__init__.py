"""The analyst's pages and downloads: a thin adapter over core, served by the same process and
port as the Dagster UI (see server.py)."""
