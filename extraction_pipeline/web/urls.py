"""Where the server serves things (no web framework import: Dagster assets link here too)."""

PREFIX = "/extraction"


def workbook_url(base_url: str, batch_id: int) -> str:
    return f"{base_url.rstrip('/')}{PREFIX}/batches/{batch_id}/workbook.xlsx"


def csv_url(base_url: str, batch_id: int) -> str:
    return f"{base_url.rstrip('/')}{PREFIX}/batches/{batch_id}/meta-analysis.csv"
