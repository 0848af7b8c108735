"""The Kubernetes deployment files (deploy/): checked offline, no cluster. The Helm values'
runLauncher and postgresql sections against the Dagster chart's own JSON schema (an excerpt; the
Kubernetes types it references remotely are not checked), and everything against the code: the
code location loads, the environment is one these settings accept, the workers' commands are
valid `extraction-pipeline worker` invocations covering every queue the steps are sent to."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from extraction_pipeline.cli import build_parser
from extraction_pipeline.core.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SECRET_VALUES = {  # what the `extraction-pipeline-env` secret holds, as placeholders
    "EXTRACTION_DATABASE_URL": "postgresql+psycopg2://ledger:secret@postgres.example.internal/extraction",
    "EXTRACTION_CELERY_BROKER": "pyamqp://extraction:secret@rabbitmq.example.internal//",
    "EXTRACTION_API_KEY": "sk-placeholder",
}


def _chart_validator() -> Draft7Validator:
    schema = json.loads((DEPLOY / "helm" / "dagster-chart-schema-excerpt.json").read_text())

    def retrieve(uri: str) -> Resource[Any]:
        # Kubernetes' own definitions are remote: accept anything there (offline).
        return Resource.from_contents(_permissive(schema, uri), default_specification=DRAFT7)

    return Draft7Validator(schema, registry=Registry(retrieve=retrieve))  # type: ignore[call-arg]


def _permissive(schema: dict[str, Any], uri: str) -> dict[str, Any]:
    stub: dict[str, Any] = {}
    for ref in _remote_refs(schema):
        base, _, fragment = ref.partition("#")
        if base != uri:
            continue
        node = stub
        for part in filter(None, fragment.split("/")):
            node = node.setdefault(part, {})
    return stub


def _remote_refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if str(node.get("$ref", "")).startswith("http") else []
        return own + [ref for value in node.values() for ref in _remote_refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _remote_refs(value)]
    return []


def _values() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())  # type: ignore[no-any-return]


def _errors(values: dict[str, Any]) -> list[str]:
    checked = {key: values[key] for key in ("runLauncher", "postgresql")}
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in _chart_validator().iter_errors(checked)]


def test_the_helm_values_pass_the_chart_schema_and_a_broken_copy_does_not() -> None:
    values = _values()
    assert _errors(values) == []
    broken = copy.deepcopy(values)
    del broken["runLauncher"]["config"]["k8sRunLauncher"]["loadInclusterConfig"]
    broken["postgresql"]["service"]["port"] = "five"
    problems = _errors(broken)
    assert any(p.startswith("runLauncher/config/k8sRunLauncher:") for p in problems), problems
    assert "postgresql/service/port: 'five' is not of type 'integer'" in problems


def _env(entries: list[dict[str, str]]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in entries}


def test_the_code_location_and_its_run_pods_get_an_environment_the_settings_accept() -> None:
    [deployment] = _values()["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "extraction_pipeline.definitions"]
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True
    secret = "extraction-pipeline-env"
    assert {"name": secret} in deployment["envSecrets"]
    assert {"name": secret} in _values()["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]
    settings = Settings.from_env({**_env(deployment["env"]), **SECRET_VALUES})
    assert settings.executor == "celery" and settings.ledger_url.startswith("postgresql+psycopg2://")
    # The run queue mirrors dagster.yaml's per-analyst limit.
    queued = _values()["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    instance = yaml.safe_load((DEPLOY.parent / "dagster.postgres.yaml").read_text())
    ours = instance["concurrency"]["runs"]
    assert queued["maxConcurrentRuns"] == ours["max_concurrent_runs"]
    [limit] = queued["tagConcurrencyLimits"]
    [expected] = ours["tag_concurrency_limits"]
    assert (limit["key"], limit["limit"]) == (expected["key"], expected["limit"])


def _worker_containers() -> list[dict[str, Any]]:
    documents = list(yaml.safe_load_all((DEPLOY / "k8s" / "workers.yaml").read_text()))
    assert all(doc["kind"] == "Deployment" for doc in documents)
    return [container for doc in documents for container in doc["spec"]["template"]["spec"]["containers"]]


def test_the_worker_deployments_cover_every_queue_with_valid_commands() -> None:
    from extraction_pipeline.defs.executor import LLM_QUEUE, PARSE_QUEUE

    served: set[str] = set()
    for container in _worker_containers():
        command = container["command"]
        assert command[:2] == ["extraction-pipeline", "worker"], shlex.join(command)
        args = build_parser().parse_args(command[1:])  # exits (SystemExit) on anything invalid
        served.update(args.queue)
        env = {**_env(container["env"]), **SECRET_VALUES}
        assert Settings.from_env(env).executor == "celery"
        assert {"secretRef": {"name": "extraction-pipeline-env"}} in container["envFrom"]
    assert served >= {PARSE_QUEUE, LLM_QUEUE}


@pytest.mark.parametrize("queue", ["pdf_parse", "llm", "export"])
def test_the_cli_and_the_executor_name_the_same_queues_and_settings(queue: str) -> None:
    from extraction_pipeline.cli import worker
    from extraction_pipeline.defs import executor

    assert queue in worker.QUEUES and worker.QUEUES == executor.QUEUES
    assert worker.ACKS_LATE == executor.CELERY_SETTINGS
