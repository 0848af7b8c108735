"""Dagster's own actions behind our users' roles (web/dagster_roles.py): real GraphQL and REST
through a real `ui`, one test per action class, each allowed and refused; and the sign-in link
`users link` prints for that `ui`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from graphql import parse

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.documents import document_partition_keys
from extraction_pipeline.core.ledger.users import Role, User, add_user
from extraction_pipeline.core.pdf.registration import register_pdf
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.synthetic import make_trial, write_report
from extraction_pipeline.web.dagster_roles import USER_TAG, Action, Refused, classify, tag_launches
from extraction_pipeline_tests.support.cli import run_cli
from extraction_pipeline_tests.support.web import UiServer

READ_POOL = '{ instance { concurrencyLimit(concurrencyKey: "llm") { slotCount } } }'
ADD_PARTITION = """mutation Add($key: String!) {
  addDynamicPartition(
    repositorySelector: {repositoryName: "__repository__", repositoryLocationName: "extraction_pipeline"},
    partitionsDefName: "documents", partitionKey: $key) { __typename ... on PythonError { message } }
}"""
LAUNCH_BACKFILL = """mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message }
  }
}"""
BACKFILL_TAGS = (
    "query Tags($id: String!) { partitionBackfillOrError(backfillId: $id)"
    " { ... on PartitionBackfill { tags { key value } } } }"
)
# One of each kind of "operate" the issue found open: pools, wiping, deleting, partitions, sensors.
OPERATIONS = [
    'mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 0) }',
    'mutation { wipeAssets(assetPartitionRanges: [{assetKey: {path: ["batch_workbook"]}}]) { __typename } }',
    'mutation { deleteRun(runId: "no-such-run") { __typename } }',
    'mutation { stopSensor(id: "x", instigationSelector: {repositoryName: "__repository__", '
    'repositoryLocationName: "extraction_pipeline", name: "batch_aggregator"}) { __typename } }',
]


def test_each_mutation_is_classified_by_what_it_does_however_it_is_written() -> None:
    def action(query: str) -> Action:
        return classify(parse(query))[0]

    assert action(READ_POOL) is Action.READ
    assert (
        action(
            'mutation { logTelemetry(action: "x", datetime: "y", clientTime: "z", clientId: "c", metadata: "{}")'
            " { __typename } }"
        )
        is Action.READ
    )
    assert action(LAUNCH_BACKFILL) is Action.LAUNCH
    assert action("mutation { r: launchRunReexecution(reexecutionParams: $p) { __typename } }") is Action.LAUNCH
    assert all(action(query) is Action.OPERATE for query in OPERATIONS)
    # An alias, a fragment or an inline fragment does not hide what runs; a mutation this module
    # does not know is an admin's.
    assert action("mutation { harmless: wipeAssets(assetPartitionRanges: []) { __typename } }") is Action.OPERATE
    assert action('mutation { ...F } fragment F on Mutation { deleteRun(runId: "x") { __typename } }') is Action.OPERATE
    assert action("mutation { ... on Mutation { terminateRuns(runIds: []) { __typename } } }") is Action.OPERATE
    assert action("mutation { someFutureMutation { __typename } }") is Action.OPERATE
    assert action(f"{LAUNCH_BACKFILL} mutation Two {{ setNuxSeen }}") is Action.LAUNCH
    # Continuing a backfill launches under the backfill's own tags (maybe another user's): an admin's.
    assert action("mutation { reexecutePartitionBackfill(reexecutionParams: $p) { __typename } }") is Action.OPERATE
    assert action('mutation { resumePartitionBackfill(backfillId: "x") { __typename } }') is Action.OPERATE


def test_the_launchers_name_goes_where_each_kind_of_launch_keeps_its_tags() -> None:
    """By the argument, not by the keys the client sent: a job backfill's parameters have a
    ``selector`` like a run's, but their tags are their own ``tags``."""
    reviewer = User(1, "Rita Reviewer", Role.REVIEWER, datetime.now(UTC), False)
    query = """mutation($b: LaunchBackfillParams!, $r: ReexecutionParams!, $m: LaunchMultipleRunsParams!) {
      a: launchPartitionBackfill(backfillParams: $b) { __typename }
      b: launchRunReexecution(reexecutionParams: $r) { __typename }
      c: launchMultipleRuns(multipleExecutionParams: $m) { __typename } }"""
    variables: dict[str, Any] = {
        "b": {
            "selector": {"partitionSetName": "x"},
            "partitionNames": ["k"],
            "tags": [{"key": USER_TAG, "value": "Ana"}],
        },
        "r": {"parentRunId": "run-1", "strategy": "FROM_FAILURE"},
        "m": [{"selector": {"jobName": "j"}}, {"selector": {"jobName": "j"}, "executionMetadata": {"tags": []}}],
    }
    tag_launches(classify(parse(query))[1], variables, reviewer, ledger=None)  # type: ignore[arg-type]
    assert (
        variables["b"]["tags"] == [{"key": USER_TAG, "value": "Rita Reviewer"}]
        and "executionMetadata" not in variables["b"]
    )
    assert variables["r"]["extraTags"] == [{"key": USER_TAG, "value": "Rita Reviewer"}]
    assert all(
        params["executionMetadata"]["tags"] == [{"key": USER_TAG, "value": "Rita Reviewer"}]
        for params in variables["m"]
    )
    # A variable left to its default (or missing) would carry a name past the check: refused.
    defaulted = (
        'mutation($p: LaunchBackfillParams = {partitionNames: ["k"]})'
        " { launchPartitionBackfill(backfillParams: $p) { __typename } }"
    )
    with pytest.raises(Refused, match="as a GraphQL variable with its value"):
        tag_launches(classify(parse(defaulted))[1], {}, reviewer, ledger=None)  # type: ignore[arg-type]


@dataclass
class Served:
    server: UiServer
    ledger: Ledger
    tokens: dict[str, str]  # user name -> personal token

    def post(self, path: str, body: dict[str, Any], user: str | None = None) -> tuple[int, dict[str, Any]]:
        headers = {"Content-Type": "application/json", "Origin": self.server.url}
        if user:
            headers["Authorization"] = f"Bearer {self.tokens[user]}"
        request = urllib.request.Request(
            f"{self.server.url}{path}", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def graphql(
        self, query: str, variables: dict[str, Any] | None = None, user: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        return self.post("/graphql", {"query": query, "variables": variables or {}}, user)

    def pool(self) -> int:
        status, answer = self.graphql(READ_POOL)
        assert status == 200, answer
        return int(answer["data"]["instance"]["concurrencyLimit"]["slotCount"])


def _serve(root: Path, env: dict[str, str] | None = None) -> Iterator[Served]:
    home = root / "home"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EXTRACTION_", "DAGSTER_"))}
    subprocess.run(
        [sys.executable, "-m", "extraction_pipeline.cli", "init"],
        env={**clean, "EXTRACTION_HOME": str(home)},
        check=True,
        capture_output=True,
    )
    ledger = Ledger.connect(f"sqlite:///{home / 'ledger.db'}")
    tokens = {
        name: add_user(ledger, name, role)[1]
        for name, role in (("Rita Reviewer", Role.REVIEWER), ("Ana Analyst", Role.REVIEWER), ("Ada Admin", Role.ADMIN))
    }
    server = UiServer(home, root / "ui.log", env=env)
    try:
        yield Served(server, ledger, tokens)
    finally:
        server.stop()
        ledger.dispose()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from _serve(tmp_path_factory.mktemp("roles"))


def _partition(served: Served, index: int) -> str:
    """A registered document's partition key, added as the launch dialog adds one. A key typed by
    hand would race the served daemon's stray-partition sensor, which removes it within a minute
    (a launch then finds no such partition)."""
    before = document_partition_keys(served.ledger)
    pdf = write_report(make_trial(index), served.server.home / "incoming")
    register_pdf(served.ledger, Settings(home=served.server.home).documents_dir, "roles", pdf)
    [key] = document_partition_keys(served.ledger) - before
    status, answer = served.graphql(ADD_PARTITION, {"key": key}, user="Ada Admin")
    added = answer["data"]["addDynamicPartition"]["__typename"]  # the sensor may have added it first
    assert status == 200 and added in ("AddDynamicPartitionSuccess", "DuplicateDynamicPartitionError"), answer
    return key


def _launch(served: Served, key: str, tags: list[dict[str, str]], user: str | None) -> tuple[int, dict[str, Any]]:
    params = {"assetSelection": [{"path": ["parsed_document"]}], "partitionNames": [key], "tags": tags}
    return served.graphql(LAUNCH_BACKFILL, {"params": params}, user=user)


def _tags(served: Served, backfill_id: str) -> dict[str, str]:
    status, answer = served.graphql(BACKFILL_TAGS, {"id": backfill_id})
    assert status == 200, answer
    return {tag["key"]: tag["value"] for tag in answer["data"]["partitionBackfillOrError"]["tags"]}


@pytest.mark.e2e
def test_reading_is_open_to_anyone_who_passes_the_gate(served: Served) -> None:
    assert served.pool() == 5
    telemetry = "mutation { setNuxSeen }"  # the UI's own bookkeeping
    assert served.graphql(telemetry)[0] == 200


@pytest.mark.e2e
def test_operating_the_instance_is_an_admins_alone(served: Served) -> None:
    for query in OPERATIONS:
        status, answer = served.graphql(query)
        assert status == 401 and "only signed-in users may change the instance" in answer["errors"][0]["message"], (
            answer
        )
        status, answer = served.graphql(query, user="Rita Reviewer")
        assert status == 403, answer
        assert (
            "only an admin may change the instance through Dagster (you are signed in as Rita Reviewer, a reviewer)"
            in answer["errors"][0]["message"]
        )
    assert served.pool() == 5  # nothing above changed it
    report = "/report_asset_materialization/batch_workbook"
    assert served.post(report, {"description": "planted"})[0] == 401
    assert served.post(report, {"description": "planted"}, user="Rita Reviewer")[0] == 403
    status, answer = served.graphql(
        'mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 6) }', user="Ada Admin"
    )
    assert status == 200 and answer["data"]["setConcurrencyLimit"] is True
    assert served.pool() == 6
    served.graphql('mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 5) }', user="Ada Admin")
    assert served.post(report, {"description": "reported"}, user="Ada Admin")[0] == 200
    # What Dagster runs is what was checked: not a query in the URL behind a body it would not read.
    zero = quote('mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 0) }')
    request = urllib.request.Request(
        f"{served.server.url}/graphql?query={zero}",
        data=json.dumps({"query": READ_POOL}).encode(),
        headers={"Content-Type": "Application/JSON", "Origin": served.server.url},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200 and "instance" in json.loads(response.read())["data"]
    assert served.pool() == 5
    log = served.server.log.read_text()
    assert "Dagster action by Ada Admin: setConcurrencyLimit" in log
    assert "refused a request to Dagster's /graphql from 127.0.0.1: only an admin may" in log


@pytest.mark.e2e
def test_launching_needs_a_signed_in_user_and_is_recorded_under_their_name(served: Served) -> None:
    key = _partition(served, 1)
    status, answer = _launch(served, key, [], user=None)
    assert status == 401 and "only signed-in users may launch runs" in answer["errors"][0]["message"], answer
    # A reviewer's typed name is replaced by their own: no backfill "by Ana Analyst" from Rita.
    status, answer = _launch(served, key, [{"key": "extraction/user", "value": "Ana Analyst"}], "Rita Reviewer")
    assert status == 200 and answer["data"]["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", answer
    assert _tags(served, answer["data"]["launchPartitionBackfill"]["backfillId"])["extraction/user"] == "Rita Reviewer"
    status, answer = _launch(served, key, [], "Rita Reviewer")  # no tag: the launcher's is added
    assert answer["data"]["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", answer
    assert _tags(served, answer["data"]["launchPartitionBackfill"]["backfillId"])["extraction/user"] == "Rita Reviewer"
    # An admin may launch for another user, one that exists.
    status, answer = _launch(served, key, [{"key": "extraction/user", "value": "Ana Analyst"}], "Ada Admin")
    assert answer["data"]["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", answer
    assert _tags(served, answer["data"]["launchPartitionBackfill"]["backfillId"])["extraction/user"] == "Ana Analyst"
    status, answer = _launch(served, key, [{"key": "extraction/user", "value": "Nobody"}], "Ada Admin")
    assert status == 400 and "'Nobody' names no user of this server" in answer["errors"][0]["message"], answer
    # Parameters written into the query cannot carry a name past the server.
    inline = (
        "mutation { launchPartitionBackfill(backfillParams: "
        '{partitionNames: ["roles-1"], tags: [{key: "extraction/user", value: "Ana Analyst"}]}) { __typename } }'
    )
    status, answer = served.graphql(inline, user="Rita Reviewer")
    assert status == 400 and "as a GraphQL variable" in answer["errors"][0]["message"], answer


@pytest.mark.e2e
def test_an_instance_may_open_dagster_to_its_own_machine(tmp_path: Path) -> None:
    """EXTRACTION_OPEN_LOOPBACK=true: an anonymous request from loopback may operate, as plain Dagster."""
    for served in _serve(tmp_path, env={"EXTRACTION_OPEN_LOOPBACK": "true"}):
        status, answer = served.graphql('mutation { setConcurrencyLimit(concurrencyKey: "llm", limit: 7) }')
        assert status == 200 and answer["data"]["setConcurrencyLimit"] is True, answer
        assert served.pool() == 7
        key = _partition(served, 2)
        status, answer = _launch(served, key, [{"key": "extraction/user", "value": "Nobody"}], user=None)
        assert status == 400, answer  # a name must still be a user's


@pytest.mark.e2e
def test_a_printed_sign_in_link_names_the_address_ui_serves(served: Served) -> None:
    """No EXTRACTION_PUBLIC_URL: `users link` names the port this `ui` serves (not 3000), and the
    link signs the user in there."""
    linked = run_cli(served.server.home, "users", "link", "Ana Analyst", check=True).stdout
    found = re.search(r"(http://\S+/extraction/signin\?code=[A-Za-z0-9_-]{43})", linked)
    assert found and found.group(1).startswith(f"{served.server.url}/extraction/signin?code="), linked
    with httpx.Client(headers={"Origin": served.server.url}, timeout=30) as client:
        assert client.get(found.group(1)).status_code == 200  # asks before it signs in
        code = found.group(1).split("code=")[1]
        signed = client.post(f"{served.server.url}/extraction/signin", data={"code": code})
        assert (
            signed.status_code == 303
            and client.get(f"{served.server.url}/extraction/me").json()["name"] == "Ana Analyst"
        )
