"""The batch page's comparisons over real HTTP: each study's arms on their proposed sides, a
signed-in reviewer names a comparison and moves arms between sides, and its forest plot follows;
nobody else can."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger.arm_sides import stored_comparisons
from extraction_pipeline.core.ledger.queries import batch_item_rows
from extraction_pipeline.core.ledger.users import Role, add_user
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.web.server import build_app
from extraction_pipeline_tests.support.arms_case import make_arms_batch, three_arm_trial, two_arm_trial
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer
from extraction_pipeline_tests.support.review_case import ReviewCase
from extraction_pipeline_tests.support.svg import parse, texts
from extraction_pipeline_tests.support.web import serving

TOKEN = "comparisons-token-for-tests"


@pytest.fixture
def site(tmp_path: Path, fake_llm: FakeLLMServer) -> Iterator[tuple[str, list[ReviewCase], str]]:
    settings = Settings(home=tmp_path / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    trials = [three_arm_trial(3), two_arm_trial(4, (12, 60), (22, 61))]
    cases = make_arms_batch(settings, ledger, fake_llm, trials)
    _user, token = add_user(ledger, "Rita", Role.REVIEWER)

    async def dagster_ui(request: object) -> PlainTextResponse:
        return PlainTextResponse("dagster ui")

    app = build_app(settings, Starlette(routes=[Route("/{rest:path}", dagster_ui)]), token=TOKEN)
    with serving(app) as base:
        yield base, cases, token
    ledger.dispose()


def _client(base: str, origin: str | None = None) -> httpx.Client:
    return httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {TOKEN}", "Origin": origin or base}, timeout=60
    )


def _selected(page: str, comparison: str) -> dict[str, str]:
    """The side each arm's select shows in ``comparison``'s form: ``{field name: side}``."""
    form = re.search(rf'class="comparison-sides" data-comparison="{re.escape(comparison)}">(.*?)</form>', page, re.S)
    assert form is not None, comparison
    return dict(re.findall(r'<select name="([^"]+)".*?<option value="(\w+)" selected', form.group(1), re.S))


def test_arms_are_proposed_moved_by_a_reviewer_and_the_plot_follows(site: tuple[str, list[ReviewCase], str]) -> None:
    base, cases, token = site
    batch_id, ledger = cases[0].batch_id, cases[0].ledger
    document = next(int(r["document_id"]) for r in batch_item_rows(ledger, batch_id) if r["id"] == cases[0].item_id)
    with _client(base) as client:
        page = html.unescape(client.get(f"/extraction/batches/{batch_id}").text)
    assert _selected(page, "intervention vs comparator") == {
        f"side:{document}:arms.1": "intervention",
        f"side:{document}:arms.2": "intervention",
        f"side:{document}:arms.3": "comparator",
        f"side:{document + 1}:arms.1": "intervention",
        f"side:{document + 1}:arms.2": "comparator",
    }
    forest = re.search(r'<figure class="forest" id="forest-1">\s*(<svg.*?</svg>)', page, re.S)
    assert forest is not None
    drawn = " ".join(texts(parse(forest.group(1))))
    assert "delirium — RR, k = 3" in drawn and "§23.3.4" in drawn  # saline split between the doses

    url = f"/extraction/batches/{batch_id}/comparisons"
    with _client(base) as anonymous:
        assert anonymous.post(url, data={"new": "2 mg vs saline"}).status_code == 401
    with _client(base) as client:
        assert client.post("/extraction/signin", data={"token": token}).status_code == 303
        client.headers["Origin"] = "https://evil.example"
        assert client.post(url, data={"new": "2 mg vs saline"}).status_code == 403
        client.headers["Origin"] = base
        assert stored_comparisons(ledger, batch_id).names == ()
        added = client.post(url, data={"new": "2 mg vs saline"})
        assert added.status_code == 303 and added.headers["location"].endswith("#comparisons")
        sides = {f"side:{document}:arms.1": "none", f"side:{document}:arms.2": "intervention"}
        saved = client.post(url, data={"comparison": "2 mg vs saline", **sides})
        page = html.unescape(client.get(saved.headers["location"]).text)
        assert "'2 mg vs saline': 1 arm(s) moved to another side" in page
        refused = client.post(url, data={"comparison": "2 mg vs saline", f"side:{document}:arms.7": "none"})
        assert "has no arm 'arms.7'" in html.unescape(client.get(refused.headers["location"]).text)
    assert _selected(page, "2 mg vs saline")[f"side:{document}:arms.1"] == "none"
    assert _selected(page, "intervention vs comparator")[f"side:{document}:arms.1"] == "intervention"
    plots = re.search(r'data-comparison="2 mg vs saline">.*?(<svg.*?</svg>)', page, re.S)
    assert plots is not None
    assert "delirium, 2 mg vs saline — RR, k = 2" in " ".join(texts(parse(plots.group(1))))
    [stored] = stored_comparisons(ledger, batch_id).sides
    assert (stored.comparison, stored.arm, stored.arm_name, stored.side) == (
        "2 mg vs saline",
        "arms.1",
        "Haloperidol 1 mg",
        "none",
    )
    downloads = re.findall(r'<a href="([^"]+comparison=2\+mg\+vs\+saline[^"]*)" download>', page)
    assert len(downloads) == 3
    with _client(base) as client:
        svg = client.get(downloads[0])
    assert svg.status_code == 200
    assert (
        'filename="batch-' in svg.headers["content-disposition"]
        and "2-mg-vs-saline" in (svg.headers["content-disposition"])
    )


def test_a_named_comparison_is_removed_and_named_again_from_its_proposal(
    site: tuple[str, list[ReviewCase], str],
) -> None:
    base, cases, token = site
    batch_id, ledger = cases[0].batch_id, cases[0].ledger
    document = next(int(r["document_id"]) for r in batch_item_rows(ledger, batch_id) if r["id"] == cases[0].item_id)
    url = f"/extraction/batches/{batch_id}/comparisons"
    with _client(base) as anonymous:
        assert anonymous.post(url, data={"remove": "2 mg vs saline"}).status_code == 401
    with _client(base) as client:
        assert client.post("/extraction/signin", data={"token": token}).status_code == 303
        client.headers["Origin"] = base
        name = "low dose out"
        client.post(url, data={"new": name})
        client.post(url, data={"comparison": name, f"side:{document}:arms.1": "none"})
        page = html.unescape(client.get(f"/extraction/batches/{batch_id}").text)
        assert _selected(page, name)[f"side:{document}:arms.1"] == "none"
        assert f'name="remove" value="{name}"' in page
        assert 'name="remove" value="intervention vs comparator"' not in page  # always pooled

        removed = client.post(url, data={"remove": name})
        page = html.unescape(client.get(removed.headers["location"]).text)
        assert f"comparison '{name}' removed" in page
        assert f'data-comparison="{name}"' not in page
        assert name not in stored_comparisons(ledger, batch_id).names
        refused = client.post(url, data={"remove": "intervention vs comparator"})
        assert "is the proposed comparison and is always pooled" in html.unescape(
            client.get(refused.headers["location"]).text
        )
        unknown = client.post(url, data={"remove": "never named"})
        assert "no comparison 'never named' in this batch" in html.unescape(
            client.get(unknown.headers["location"]).text
        )

        # Named again, it starts from the proposed sides, not from the sides it had.
        client.post(url, data={"new": name})
        page = html.unescape(client.get(f"/extraction/batches/{batch_id}").text)
    assert _selected(page, name)[f"side:{document}:arms.1"] == "intervention"
