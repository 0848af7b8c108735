"""`extraction-pipeline worker` and the Celery settings: bad input gets one clear line, no
secret is echoed, and the configuration a worker loads acknowledges steps only when done."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from extraction_pipeline.cli.worker import worker_config
from extraction_pipeline.core.errors import ConfigError
from extraction_pipeline.core.settings import Settings

PG = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"


def _cli(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXTRACTION_")}
    return subprocess.run(
        [sys.executable, "-m", "extraction_pipeline.cli", *args],
        env={**clean, "EXTRACTION_HOME": str(tmp_path / "home"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code and len(lines) == 1 and fragment in lines[0], (result.returncode, result.stderr)
    return lines[0]


def test_celery_needs_postgresql_for_the_ledger_and_for_dagster() -> None:
    with pytest.raises(ConfigError, match="EXTRACTION_EXECUTOR=celery needs PostgreSQL"):
        Settings.from_env({"EXTRACTION_EXECUTOR": "celery"})  # SQLite ledger
    with pytest.raises(ConfigError, match="EXTRACTION_EXECUTOR=celery needs PostgreSQL"):
        Settings.from_env({"EXTRACTION_EXECUTOR": "celery", "EXTRACTION_DATABASE_URL": PG})  # SQLite Dagster
    with pytest.raises(ConfigError, match="must be one of in_process, celery"):
        Settings.from_env({"EXTRACTION_EXECUTOR": "threads"})
    ok = Settings.from_env(
        {"EXTRACTION_EXECUTOR": "celery", "EXTRACTION_DATABASE_URL": PG, "EXTRACTION_DAGSTER_STORAGE": "postgres"}
    )
    assert (ok.executor, ok.celery_broker, ok.celery_backend) == ("celery", "pyamqp://guest@127.0.0.1//", "rpc://")


def test_a_broker_url_with_the_wrong_scheme_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as error:
        Settings.from_env({"EXTRACTION_CELERY_BROKER": "https://admin:hunter2@mq.example.org/"})
    assert "'https'" in str(error.value) and "hunter2" not in str(error.value)
    assert "hunter2" not in repr(Settings(celery_broker="redis://:hunter2@127.0.0.1:6379/0"))


def test_a_worker_refuses_a_ledger_other_machines_cannot_reach(tmp_path: Path) -> None:
    _one_line(_cli(tmp_path, {}, "worker"), 2, "a worker needs the shared PostgreSQL ledger")


def test_an_unreachable_broker_is_one_line_without_its_password(tmp_path: Path) -> None:
    env = {"EXTRACTION_DATABASE_URL": PG, "EXTRACTION_CELERY_BROKER": "pyamqp://guest:topsecret@127.0.0.1:1//"}
    line = _one_line(_cli(tmp_path, env, "worker", "--queue", "llm"), 1, "cannot reach the Celery broker")
    assert "topsecret" not in line and "127.0.0.1:1" in line


def test_an_unknown_queue_is_a_usage_error(tmp_path: Path) -> None:
    result = _cli(tmp_path, {"EXTRACTION_DATABASE_URL": PG}, "worker", "--queue", "gpu")
    _one_line(result, 2, "invalid choice: 'gpu'")


def test_the_worker_configuration_acknowledges_late_and_is_private(tmp_path: Path) -> None:
    settings = Settings(celery_broker="redis://:hunter2@127.0.0.1:6379/3", celery_backend="redis://127.0.0.1:6379/4")
    path = worker_config(settings, tmp_path / "celery")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the broker URL holds a password
    namespace: dict[str, object] = {}
    exec(path.read_text(), namespace)  # noqa: S102  (the file Celery itself will import)
    assert namespace["broker_url"] == "redis://:hunter2@127.0.0.1:6379/3"
    assert namespace["result_backend"] == "redis://127.0.0.1:6379/4"
    assert (namespace["task_acks_late"], namespace["task_reject_on_worker_lost"]) == (True, True)
    assert namespace["worker_prefetch_multiplier"] == 1


def test_celery_mode_routes_each_step_to_its_queue_and_keeps_exports_beside_the_daemon(tmp_path: Path) -> None:
    probe = (
        "import json, warnings; warnings.simplefilter('ignore')\n"
        "from extraction_pipeline.definitions import defs\n"
        "defs = defs()\n"
        "jobs = {name: defs.resolve_job_def(name) for name in ('extract_documents', 'export_batch')}\n"
        "implicit = defs.resolve_implicit_global_asset_job_def()\n"
        "print(json.dumps({\n"
        "  'executors': {name: job.executor_def.name for name, job in jobs.items()},\n"
        "  'implicit': implicit.executor_def.name,\n"
        "  'queues': {n.name: n.tags.get('dagster-celery/queue') for n in implicit.graph.node_defs},\n"
        "}))\n"
    )
    env = {"EXTRACTION_EXECUTOR": "celery", "EXTRACTION_DATABASE_URL": PG, "EXTRACTION_DAGSTER_STORAGE": "postgres"}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXTRACTION_")}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={**clean, "EXTRACTION_HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    import json

    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["executors"] == {"extract_documents": "celery", "export_batch": "in_process"}
    assert seen["implicit"] == "celery"  # UI backfills too
    assert seen["queues"] == {"parsed_document": "pdf_parse", "extracted_document": "llm", "batch_workbook": "export"}
