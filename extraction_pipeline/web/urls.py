"""Where the server serves things (no web framework import: Dagster assets link here too)."""

PREFIX = "/extraction"


def workbook_url(base_url: str, batch_id: int) -> str:
    return f"{base_url.rstrip('/')}{PREFIX}/batches/{batch_id}/workbook.xlsx"


def csv_url(base_url: str, batch_id: int) -> str:
    return f"{base_url.rstrip('/')}{PREFIX}/batches/{batch_id}/meta-analysis.csv"


def batch_runs_url(base_url: str, batch_uid: str) -> str:
    """The Dagster UI's Runs page filtered to one batch's runs (by its uid tag)."""
    return f"{base_url.rstrip('/')}/runs?q%5B0%5D=tag%3Aextraction%2Fbatch_uid%3D{batch_uid}"


def project_url(project: str) -> str:
    from urllib.parse import quote

    return f"{PREFIX}/projects/{quote(project, safe='')}"
