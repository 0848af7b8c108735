"""The provider matrix: OpenAI, Azure OpenAI, Anthropic, Gemini, Ollama and a self-hosted vLLM,
each through litellm over real HTTP to a loopback fake that speaks that provider's own API and
refuses what it refuses (support/providers/). Per row: real corpus papers extracted with grounded
values, tokens and cost recorded; errors classified transient or permanent; prompt caching
reported and priced. Every fake's ``violations`` stays empty: nothing the gateway sent would have
been refused by the real provider."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from extraction_pipeline.core.errors import PermanentError, QuotaExhaustedError, RateLimitedError, TransientError
from extraction_pipeline.core.extraction.narrowing import outcomes_question
from extraction_pipeline.core.extraction.prompts import build_messages, document_from_messages
from extraction_pipeline.core.ledger import Ledger
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction, complete_json
from extraction_pipeline.core.llm.rate_headers import read_rate_limits
from extraction_pipeline.core.settings import Settings
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline_tests.support.documents import register_all
from extraction_pipeline_tests.support.oracle import CORPUS, build_answer, skeleton
from extraction_pipeline_tests.support.providers import (
    AnthropicFake,
    AzureOpenAIFake,
    GeminiFake,
    OllamaFake,
    OpenAIFake,
    ProviderFake,
    Reply,
    VLLMFake,
)

PAPERS = ("3321528", "4493951")  # small papers whose gold values are printed in the text


@dataclass(frozen=True)
class Row:
    name: str
    fake: Callable[[], ProviderFake]
    model: str
    api_key: str
    priced: bool  # litellm has a price for the model (self-hosted ones cost nothing)
    # the errors this provider sends: (reply, expected class, a rate limit?, retry-after it says)
    errors: tuple[tuple[Reply, type[Exception], float | None], ...]


RATE_LIMIT = Reply(status=429, error="rate_limit")
CONTEXT = Reply(status=400, error="context_length")
FILTERED_PROMPT = Reply(status=400, error="filtered")
FILTERED_ANSWER = Reply("{}", finish="filtered")
REFUSED = Reply("I can't help with that", finish="refused")
NO_CHOICES = Reply("{}", finish="no_choices")
NOT_JSON = Reply("{}", finish="not_json")  # a proxy's page with status 200
HTML_PAGE = Reply(status=502, error="html_page")  # a proxy's own error page: every provider may meet one
ROWS = [
    Row(
        "openai",
        OpenAIFake,
        "openai/gpt-4o-mini",
        "sk-test-not-a-secret",
        True,
        (
            (RATE_LIMIT, RateLimitedError, 2.7),
            # No Retry-After: without a budget nothing says how long (with one: test_budgets.py).
            (Reply(status=429, error="rate_limit_unhinted"), RateLimitedError, None),
            (Reply(status=503, error="overloaded"), TransientError, None),
            (CONTEXT, PermanentError, None),
            (FILTERED_PROMPT, PermanentError, None),
            (FILTERED_ANSWER, PermanentError, None),
            (REFUSED, PermanentError, None),
            (NO_CHOICES, TransientError, None),
            (NOT_JSON, TransientError, None),
            (Reply(status=429, error="insufficient_quota"), QuotaExhaustedError, 600.0),
        ),
    ),
    # Today's reasoning models: no temperature but the default, max_completion_tokens, reasoning
    # tokens billed as output.
    Row(
        "openai-gpt-5",
        OpenAIFake,
        "openai/gpt-5-mini",
        "sk-test-not-a-secret",
        True,
        ((RATE_LIMIT, RateLimitedError, 2.7), (CONTEXT, PermanentError, None)),
    ),
    Row(
        "openai-o4",
        OpenAIFake,
        "openai/o4-mini",
        "sk-test-not-a-secret",
        True,
        ((RATE_LIMIT, RateLimitedError, 2.7), (FILTERED_ANSWER, PermanentError, None)),
    ),
    Row(
        "azure",
        AzureOpenAIFake,
        "azure/gpt-4o-mini",
        "azure-test-key",
        True,
        (
            (RATE_LIMIT, RateLimitedError, 6.0),
            (CONTEXT, PermanentError, None),
            (FILTERED_PROMPT, PermanentError, None),
            (FILTERED_ANSWER, PermanentError, None),
        ),
    ),
    Row(
        "anthropic",
        AnthropicFake,
        "anthropic/claude-sonnet-4-5-20250929",
        "sk-ant-test",
        True,
        (
            (RATE_LIMIT, RateLimitedError, 7.0),
            (Reply(status=529, error="overloaded"), TransientError, None),
            (CONTEXT, PermanentError, None),
            (FILTERED_ANSWER, PermanentError, None),
            (Reply(status=401, error="auth"), PermanentError, None),
            (Reply(status=400, error="insufficient_quota"), QuotaExhaustedError, 600.0),
        ),
    ),
    # The alias Anthropic's model list gives beside the dated name (the latest Sonnet 4.5 snapshot):
    # litellm's model map knows it too (prices, 64,000 output tokens).
    Row(
        "anthropic-alias",
        AnthropicFake,
        "anthropic/claude-sonnet-4-5",
        "sk-ant-test",
        True,
        ((RATE_LIMIT, RateLimitedError, 7.0), (FILTERED_ANSWER, PermanentError, None)),
    ),
    Row(
        "gemini",
        GeminiFake,
        "gemini/gemini-2.5-flash",
        "gemini-test-key",
        True,
        (
            (RATE_LIMIT, RateLimitedError, 17.0),
            (Reply(status=503, error="overloaded"), TransientError, None),
            (CONTEXT, PermanentError, None),
            (FILTERED_ANSWER, PermanentError, None),
            (Reply(status=400, error="invalid"), PermanentError, None),
        ),
    ),
    # Gemini 2.5 Pro thinks before every answer (it cannot be turned off), out of the output limit.
    Row(
        "gemini-pro",
        GeminiFake,
        "gemini/gemini-2.5-pro",
        "gemini-test-key",
        True,
        ((RATE_LIMIT, RateLimitedError, 17.0), (FILTERED_ANSWER, PermanentError, None)),
    ),
    Row(
        "ollama",
        OllamaFake,
        "ollama_chat/llama3.1",
        "ollama-unused",
        False,
        ((Reply(status=503, error="overloaded"), TransientError, None), (Reply(status=400), PermanentError, None)),
    ),
    Row(
        "vllm",
        VLLMFake,
        "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct",
        "vllm-test-key",
        False,
        (
            (Reply(status=503, error="overloaded"), TransientError, None),
            (CONTEXT, PermanentError, None),
            (Reply(status=400, error="invalid"), PermanentError, None),
        ),
    ),
]
BY_NAME = {row.name: row for row in ROWS}


def _corpus() -> None:
    if not (CORPUS / "gold_outcomes.json").is_file():
        pytest.skip("the corpus of real trial PDFs is not available here (set EXTRACTION_CORPUS)")


@dataclass
class Corpus:
    settings: Settings
    ledger: Ledger
    documents: list[int]
    parsed: dict[str, Any]  # sha256 -> ParsedDocument
    oracles: dict[str, Any]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """The papers registered and parsed once, for every row (each row extracts its own batch)."""
    _corpus()
    from extraction_pipeline.core.pdf.parsing import parse_document

    settings = Settings(home=tmp_path_factory.mktemp("matrix") / "home")
    settings.home_dir.mkdir(parents=True)
    ledger = Ledger.connect(settings.ledger_url)
    docs = register_all(ledger, settings.documents_dir, "matrix", [CORPUS / "pdf" / f"{p}.pdf" for p in PAPERS])
    parsed = {}
    for doc in docs:
        row = ledger_document(ledger, doc.id)
        parsed[row["sha256"]] = parse_document(ledger, sha256=row["sha256"], stored_path=row["stored_path"])
    yield Corpus(settings, ledger, [d.id for d in docs], parsed, {p: build_answer(p) for p in PAPERS})
    ledger.dispose()


def ledger_document(ledger: Ledger, document_id: int) -> dict[str, Any]:
    from sqlalchemy import select

    from extraction_pipeline.core.ledger.schema import documents

    with ledger.engine.connect() as conn:
        return dict(conn.execute(select(documents).where(documents.c.id == document_id)).mappings().one())


def _oracle_answer(corpus: Corpus) -> Callable[[list[dict[str, str]]], Reply]:
    def answer(messages: list[dict[str, str]]) -> Reply:
        document = skeleton(document_from_messages(messages))
        found = [o for o in corpus.oracles.values() if skeleton(o.fingerprint) in document]
        # A prompt that lost its paper (cut by the provider) gets an empty answer, as a model would.
        return Reply(found[0].as_json() if found else json.dumps({}))

    return answer


@pytest.fixture(params=[row.name for row in ROWS])
def row(request: pytest.FixtureRequest) -> Iterator[tuple[Row, ProviderFake]]:
    spec = BY_NAME[request.param]
    fake = spec.fake().start()
    yield spec, fake
    fake.stop()


def _config(spec: Row, fake: ProviderFake) -> LLMConfig:
    return LLMConfig(model=spec.model, api_base=fake.api_base, api_key=spec.api_key, timeout_seconds=30)


def test_each_provider_extracts_real_papers_with_grounded_values_and_recorded_cost(
    corpus: Corpus, row: tuple[Row, ProviderFake]
) -> None:
    from extraction_pipeline.core.extraction.extract import extract_item
    from extraction_pipeline.core.ledger.queries import batch_item_rows

    spec, fake = row
    fake.answer = _oracle_answer(corpus)
    batch = create_batch(
        corpus.ledger, idempotency_key=f"matrix-{spec.name}", project="matrix", user="u", document_ids=corpus.documents
    ).id
    llm = _config(spec, fake)
    for item in batch_item_rows(corpus.ledger, batch):
        parsed = corpus.parsed[item["sha256"]]
        outcome = extract_item(corpus.ledger, item_id=item["id"], run_id="r", worker="w", parsed=parsed, llm=llm)
        assert outcome.status == "completed", outcome.reason
        fields = outcome.result["fields"]
        text = skeleton(" ".join(parsed.pages_text))
        oracle = next(o for o in corpus.oracles.values() if skeleton(o.fingerprint) in text)
        for gold in oracle.gold:
            got = fields[f"outcomes.{gold.outcome}.{gold.field}"]
            assert got["status"] == "verified" and got["value"] == gold.value, (spec.name, gold, got)
        stored = states.get_item(corpus.ledger, item["id"])
        assert stored is not None and stored["model"] == spec.model
        assert stored["tokens_in"] > 1000 and stored["tokens_out"] > 0
        if spec.priced:
            assert stored["cost_usd"] > 0
        else:
            assert stored["cost_usd"] == 0
    assert fake.violations == []  # nothing sent that the provider would refuse
    assert len(fake.answered) == len(PAPERS)
    if isinstance(fake, OllamaFake):
        assert fake.truncated == []  # the gateway asked for a window that holds the paper
        assert all(a.request.body["options"]["num_ctx"] > a.prompt_tokens for a in fake.answered)


def test_double_extraction_across_two_providers_sends_each_its_own_key_and_endpoint(corpus: Corpus) -> None:
    """OpenAI's model first, Anthropic's second: each provider is called at its own endpoint with
    its own key (EXTRACTION_API_KEYS / EXTRACTION_API_BASES), and neither ever sees the other's."""
    from extraction_pipeline.core.extraction.extract import extract_item
    from extraction_pipeline.core.ledger.queries import batch_item_rows

    first, second = BY_NAME["openai"], BY_NAME["anthropic"]
    second_key = "sk-ant-second-provider-key"
    with first.fake() as openai, second.fake() as anthropic:
        openai.answer = anthropic.answer = _oracle_answer(corpus)
        settings = Settings.from_env(
            {
                "EXTRACTION_API_KEYS": f"anthropic={second_key}",
                "EXTRACTION_API_BASES": f"anthropic={anthropic.api_base}",
            }
        )
        llm = LLMConfig(
            model=first.model,
            api_base=openai.api_base,
            api_key=first.api_key,
            keys=settings.api_keys,
            bases=settings.api_bases,
            timeout_seconds=30,
        )
        batch = create_batch(
            corpus.ledger,
            idempotency_key="matrix-two-providers",
            project="matrix",
            user="u",
            document_ids=corpus.documents,
            second_model=second.model,
            fresh=True,  # the matrix's other rows stored answers for these prompts: asked again here
        ).id
        for item in batch_item_rows(corpus.ledger, batch):
            parsed = corpus.parsed[item["sha256"]]
            outcome = extract_item(corpus.ledger, item_id=item["id"], run_id="r", worker="w", parsed=parsed, llm=llm)
            assert outcome.status == "completed", outcome.reason
            assert set(outcome.result["usage_by_model"]) == {first.model, second.model}
            agreement = outcome.result["agreement"]
            assert agreement and set(agreement.values()) == {"agree"}  # the same oracle answer from both
        sent_openai = [r.headers.get("authorization") for r in openai.requests]
        sent_anthropic = [r.headers.get("x-api-key") for r in anthropic.requests]
        assert len(openai.answered) == len(anthropic.answered) == len(PAPERS)
        assert set(sent_openai) == {f"Bearer {first.api_key}"} and set(sent_anthropic) == {second_key}
        assert openai.violations == [] and anthropic.violations == []


def test_a_schema_gemini_will_not_serve_is_asked_in_json_mode_once_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from extraction_pipeline.core.llm.providers import base

    monkeypatch.setattr(base, "_REFUSED_SCHEMAS", set())
    spec = BY_NAME["gemini"]
    with spec.fake() as fake:
        fake.answer = lambda messages: Reply(json.dumps({}))
        llm = _config(spec, fake)
        complete_extraction(llm, _short_messages(), RCT_TEMPLATE)
        complete_extraction(llm, _short_messages(), RCT_TEMPLATE)
        sent = [r.body.get("generationConfig") or r.body.get("generation_config") or {} for r in fake.requests]
    schema_of = [c.get("responseJsonSchema") or c.get("response_json_schema") for c in sent]
    mime_of = [c.get("responseMimeType") or c.get("response_mime_type") for c in sent]
    assert len(fake.declined) == 1 and "too many states for serving" in fake.declined[0]
    assert schema_of[0]  # the whole schema, refused
    # asked again at once in JSON mode, and so is the next call: two answers for three requests
    assert schema_of[1:] == [None, None] and mime_of[1:] == ["application/json", "application/json"]
    assert len(fake.answered) == 2 and fake.violations == []


def test_gemini_thinking_is_counted_and_a_limit_spent_thinking_is_named() -> None:
    """Gemini 2.5 spends thinking tokens out of maxOutputTokens and bills them as output: they are
    in the answer's tokens and cost; a limit spent whole on thinking is named, not asked again in
    smaller questions (each would think as long)."""
    from extraction_pipeline.core.errors import AnswerCutError

    spec = BY_NAME["gemini-pro"]
    with spec.fake() as fake:
        fake.answer = lambda messages: Reply(json.dumps({}))
        reply = complete_extraction(_config(spec, fake), _short_messages(), RCT_TEMPLATE)
        written = fake.answered[0].completion_tokens
        assert reply.usage.tokens_out == written + 2_400 and reply.usage.cost_usd > 0  # the answer and the thoughts
        with pytest.raises(PermanentError, match=r"spent its whole output limit of 1000 tokens thinking") as raised:
            complete_extraction(replace(_config(spec, fake), output_tokens=1000), _short_messages(), RCT_TEMPLATE)
        assert not isinstance(raised.value, AnswerCutError) and raised.value.usage is not None
        assert raised.value.usage.tokens_out == 1000  # paid for, and counted
        assert fake.violations == []


def _short_messages() -> list[dict[str, str]]:
    return build_messages(RCT_TEMPLATE, ["Deaths occurred in 12 of 100 patients on placebo."])


def test_each_providers_errors_are_classified_through_its_own_http_answers(row: tuple[Row, ProviderFake]) -> None:
    from extraction_pipeline.core.llm.providers import adapter_for

    spec, fake = row
    llm = _config(spec, fake)
    for reply, expected, retry_after in spec.errors:
        fake.push(reply)
        if reply.finish == "filtered" and adapter_for(llm).withholds_recitation:
            fake.push(reply)  # Gemini: withheld, asked once more quoting less (RECITATION?), withheld again
        with pytest.raises(expected) as raised:
            complete_extraction(llm, _short_messages(), RCT_TEMPLATE)
        error = raised.value
        if expected is PermanentError:
            assert not isinstance(error, TransientError), (spec.name, reply, error)
        else:
            assert isinstance(error, TransientError)
            limited = reply.error in ("rate_limit", "rate_limit_unhinted")
            assert isinstance(error, RateLimitedError) is limited, (spec.name, reply, error)
        if retry_after is not None:
            assert isinstance(error, TransientError) and error.retry_after == pytest.approx(retry_after), error
        if reply.finish == "filtered":
            assert "content_filter" in str(error)  # said plainly, never an empty extraction
        if reply.finish == "refused":
            assert f"{spec.model} refused: I can't help with that" in str(error)
        if reply.finish == "no_choices":
            assert isinstance(error, TransientError) and error.provider  # the breaker is told
            assert "answered with no choices" in str(error)
        if reply.error == "insufficient_quota":
            assert str(error).startswith("the provider says the account has no credit left: "), error
            assert "You exceeded your current quota" in str(error) or "credit balance is too low" in str(error)
        if reply.finish == "not_json":
            assert str(error).startswith("provider answered HTTP 200 with a body that is not JSON: '<html>"), error
    fake.push(HTML_PAGE)
    with pytest.raises(TransientError, match=r": an HTML error page \(502 Bad Gateway\)$") as page:
        complete_extraction(llm, _short_messages(), RCT_TEMPLATE)
    assert page.value.provider  # the breaker is told
    fake.answer = lambda messages: Reply(json.dumps({}))
    complete_extraction(llm, _short_messages(), RCT_TEMPLATE)  # and it answers again afterwards
    assert fake.violations == []


def test_an_answer_slower_than_the_timeout_is_named_so_not_unreachable() -> None:
    with OpenAIFake() as fake:
        fake.push(Reply("{}", delay=2.0))
        llm = LLMConfig(model="openai/gpt-4o-mini", api_base=fake.api_base, api_key="sk-test-not-a-secret")
        with pytest.raises(TransientError) as raised:
            complete_extraction(replace(llm, timeout_seconds=1), _short_messages(), RCT_TEMPLATE)
    assert str(raised.value).startswith("provider did not answer within 1 s (the call was abandoned")
    assert raised.value.provider
    assert raised.value.usage is not None and raised.value.usage.abandoned_calls == 1  # possibly billed


def _paper_messages(corpus: Corpus, missed: tuple[str, ...] = ()) -> list[dict[str, str]]:
    parsed = next(iter(corpus.parsed.values()))
    return build_messages(RCT_TEMPLATE, parsed.pages_text, parsed.tables, missed=missed)


def _paper(corpus: Corpus, index: int) -> Any:
    return list(corpus.parsed.values())[index]


@pytest.mark.parametrize("name", ["openai", "azure", "anthropic", "gemini", "vllm"])
def test_the_follow_up_reads_the_paper_and_the_next_paper_the_template_from_the_cache(
    corpus: Corpus, name: str
) -> None:
    """The calls of a batch as the extraction makes them: a paper's first ask (marked: the follow-up
    is expected), its follow-up (outcomes only: another schema), then the next paper."""
    spec = BY_NAME[name]
    one, two = _paper(corpus, 0), _paper(corpus, 1)
    narrowed = outcomes_question(RCT_TEMPLATE)
    with spec.fake() as fake:
        fake.answer = _oracle_answer(corpus)
        llm = _config(spec, fake)
        first = complete_extraction(
            llm, build_messages(RCT_TEMPLATE, one.pages_text, one.tables), RCT_TEMPLATE, cache=True
        )
        asked = build_messages(RCT_TEMPLATE, one.pages_text, one.tables, missed=("All-cause mortality",), only=narrowed)
        follow_up = complete_extraction(llm, asked, narrowed, cache=True)  # marked: the prefix is fresh
        other = complete_extraction(llm, build_messages(RCT_TEMPLATE, two.pages_text, two.tables), RCT_TEMPLATE)
        assert fake.violations == []
        schemas = [(r.body.get("response_format") or {}).get("type") for r in fake.requests]
    assert first.usage.cached_tokens == 0
    if name in ("openai", "azure"):
        # OpenAI's cache starts with the structured output schema: the follow-up asks with another
        # one and reads nothing; the next paper's first ask shares the schema and the template.
        assert schemas == ["json_schema"] * 3 and follow_up.usage.cached_tokens == 0
    else:
        # The system prompt and the paper, read back: all of the first prompt but what the
        # provider's cache steps leave (OpenAI-shaped: 128 tokens; vLLM: 16).
        assert first.usage.tokens_in - 128 <= follow_up.usage.cached_tokens <= first.usage.tokens_in
    # The next paper reads the template (the system prompt) and not the paper.
    assert 1024 <= other.usage.cached_tokens < other.usage.tokens_in - 1000
    for read in (follow_up, other):
        if spec.priced and read.usage.cached_tokens:
            assert read.usage.saved_usd > 0 and read.usage.cache_written_tokens == 0
    if name == "anthropic":  # marked: written at 1.25x, which the reads pay back
        assert first.usage.cache_written_tokens == first.usage.tokens_in and first.usage.saved_usd < 0
        assert first.usage.saved_usd + follow_up.usage.saved_usd + other.usage.saved_usd > 0
    else:  # the others cache unasked and charge nothing to write
        assert first.usage.cache_written_tokens == 0 and first.usage.saved_usd == 0


def test_a_cache_entry_past_its_lifetime_is_written_again_not_read(corpus: Corpus) -> None:
    spec = BY_NAME["anthropic"]
    one = _paper(corpus, 0)
    messages = build_messages(RCT_TEMPLATE, one.pages_text, one.tables)
    with AnthropicFake() as fake:
        fake.cache.ttl_seconds = 1.0  # Anthropic's is 5 minutes
        fake.answer = _oracle_answer(corpus)
        llm = _config(spec, fake)
        first = complete_extraction(llm, messages, RCT_TEMPLATE, cache=True)
        soon = complete_extraction(llm, messages, RCT_TEMPLATE, cache=True)
        time.sleep(1.5)
        late = complete_extraction(llm, messages, RCT_TEMPLATE, cache=True)
        assert fake.violations == []
    assert first.usage.cache_written_tokens > 0 and soon.usage.cached_tokens == first.usage.cache_written_tokens
    assert late.usage.cached_tokens == 0 and late.usage.cache_written_tokens == first.usage.cache_written_tokens
    assert late.usage.saved_usd < 0 < soon.usage.saved_usd  # a write past the lifetime is only a surcharge


def test_anthropic_marks_the_template_always_and_the_paper_only_when_it_will_be_read(corpus: Corpus) -> None:
    from extraction_pipeline.core.extraction.markers import TABLES_CLOSE

    spec = BY_NAME["anthropic"]
    one = _paper(corpus, 0)
    narrowed = outcomes_question(RCT_TEMPLATE)
    messages = build_messages(RCT_TEMPLATE, one.pages_text, one.tables, missed=("All-cause mortality",), only=narrowed)
    plain = json.loads(json.dumps(messages))
    with AnthropicFake() as fake:
        fake.answer = _oracle_answer(corpus)
        # The first answer is not JSON: the repair call appends to the same conversation.
        fake.push(Reply("not json"))
        result = complete_extraction(_config(spec, fake), messages, narrowed, cache=True)
        assert result.repaired and fake.violations == []
        unmarked = complete_extraction(_config(spec, fake), messages, narrowed, cache=False)
        first, repair, plain_call = (r.body for r in fake.requests)
    assert messages == plain  # the caller's messages (answer key, stored prompt) stay strings
    for body in (first, repair, plain_call):
        [system] = body["system"]
        assert system["cache_control"] == {"type": "ephemeral"} and system["text"] == messages[0]["content"]
    for body in (first, repair):
        prefix, tail = body["messages"][0]["content"]
        assert prefix["cache_control"] == {"type": "ephemeral"} and prefix["text"].endswith(TABLES_CLOSE)
        assert "cache_control" not in tail and tail["text"].lstrip().startswith("<THIS_CALL>")
        assert prefix["text"] + tail["text"] == messages[1]["content"]
    assert [m["role"] for m in repair["messages"]] == ["user", "assistant", "user"]
    assert "cache_control" not in json.dumps(repair["messages"][1:])  # only the prefix is marked
    assert "cache_control" not in json.dumps(plain_call["messages"])  # no read expected: the paper unmarked
    # The repair read what the first call wrote; the unmarked call read the template only.
    assert fake.answered[0].cache_written > 0 and fake.answered[0].cached_tokens == 0
    assert fake.answered[1].cached_tokens == fake.answered[0].cache_written
    assert result.usage.cached_tokens == fake.answered[1].cached_tokens
    assert 0 < unmarked.usage.cached_tokens < result.usage.cached_tokens and unmarked.usage.cache_written_tokens == 0


def test_only_anthropic_gets_cache_marks_and_unmarked_anthropic_prompts_are_not_cached(corpus: Corpus) -> None:
    for name in ("openai", "gemini", "vllm"):
        spec = BY_NAME[name]
        with spec.fake() as fake:
            fake.answer = _oracle_answer(corpus)
            complete_extraction(_config(spec, fake), _paper_messages(corpus), RCT_TEMPLATE)
            assert "cache_control" not in json.dumps(fake.requests[0].body)
    with AnthropicFake() as fake:  # the fake caches only marked content, as Anthropic does
        for _ in range(2):
            fake.answer = _oracle_answer(corpus)
            body = {
                "model": "claude-sonnet-4-5-20250929",
                "max_tokens": 100,
                "messages": [{"role": "user", "content": _paper_messages(corpus)[1]["content"]}],
            }
            _post(fake, "/v1/messages", body, {"x-api-key": "k", "anthropic-version": "2023-06-01"})
        assert [a.cached_tokens for a in fake.answered] == [0, 0]


def test_complete_json_works_for_every_provider(row: tuple[Row, ProviderFake]) -> None:
    spec, fake = row
    fake.answer = lambda messages: Reply(json.dumps({"decision": "keep"}))
    content, usage = complete_json(_config(spec, fake), [{"role": "user", "content": "Answer in JSON: keep?"}])
    assert json.loads(content) == {"decision": "keep"} and usage.tokens_in > 0
    assert fake.violations == []


def _post(fake: ProviderFake, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    import httpx

    response = httpx.post(f"{fake.origin}{path}", json=body, headers=headers, timeout=10)
    return response.status_code, response.json()


def test_the_fakes_refuse_what_their_providers_refuse() -> None:
    """The checks bite: what litellm would send for our schema unaided, and what a careless caller
    sends, is refused with the provider's own body."""
    from extraction_pipeline.core.templates.schema import output_json_schema

    schema = output_json_schema(RCT_TEMPLATE)
    user = [{"role": "user", "content": "hi"}]
    with AnthropicFake() as fake:
        auth = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        status, body = _post(fake, "/v1/messages", {"model": "claude-sonnet-4-5-20250929", "messages": user}, auth)
        assert (status, body["type"], body["error"]["type"]) == (400, "error", "invalid_request_error")
        assert "max_tokens" in body["error"]["message"]
        strict = {"type": "json_schema", "schema": schema}
        request = {"model": "claude-sonnet-4-5-20250929", "max_tokens": 10, "messages": user, "output_format": strict}
        status, body = _post(fake, "/v1/messages", request, {**auth, "anthropic-beta": "structured-outputs-2025-11-13"})
        assert status == 400 and "additionalProperties" in body["error"]["message"]
        system_role = [{"role": "system", "content": "s"}, *user]
        status, _ = _post(
            fake,
            "/v1/messages",
            {"model": "claude-sonnet-4-5-20250929", "max_tokens": 5, "messages": system_role},
            auth,
        )
        assert status == 400 and len(fake.violations) == 3
    with GeminiFake() as fake:
        config = {"responseMimeType": "application/json", "responseJsonSchema": schema}
        status, body = _post(
            fake,
            "/v1beta/models/gemini-2.5-flash:generateContent",
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": config},
            {"x-goog-api-key": "k"},
        )
        assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT") and "$ref" in body["error"]["message"]
    with OllamaFake() as fake:
        fake.answer = lambda messages: Reply(json.dumps({"saw": document_from_messages(messages)[:20]}))
        long = _short_messages()[1]["content"].replace("Deaths", "Deaths " + "x " * 20_000)
        status, body = _post(
            fake,
            "/api/chat",
            {"model": "llama3.1", "stream": False, "messages": [{"role": "user", "content": long}]},
            {},
        )
        assert status == 200 and fake.truncated and json.loads(body["message"]["content"]) == {"saw": ""}
    with OpenAIFake() as fake:
        bearer = {"authorization": "Bearer sk-test-not-a-secret"}
        for asked, param, code in (
            ({"temperature": 0, "max_completion_tokens": 100}, "temperature", "unsupported_value"),
            ({"max_tokens": 100}, "max_tokens", "unsupported_parameter"),
            ({"reasoning_effort": "minimal"}, "reasoning_effort", "unsupported_value"),  # gpt-5 only
        ):
            status, body = _post(fake, "/v1/chat/completions", {"model": "o4-mini", "messages": user, **asked}, bearer)
            assert (status, body["error"]["param"], body["error"]["code"]) == (400, param, code), body
        fake.answer = lambda messages: Reply("ok " * 400)
        reasoning: dict[str, object] = {
            "model": "gpt-5-mini",
            "messages": user,
            "reasoning_effort": "low",
            "max_completion_tokens": 300,
        }
        status, body = _post(fake, "/v1/chat/completions", reasoning, bearer)
        # 256 reasoning tokens out of the 300: the visible answer is cut, and both are billed as output
        assert (status, body["choices"][0]["finish_reason"]) == (200, "length")
        details = body["usage"]["completion_tokens_details"]
        assert details["reasoning_tokens"] == 256 and body["usage"]["completion_tokens"] == 300
        status, body = _post(fake, "/v1/chat/completions", {**reasoning, "max_completion_tokens": 256}, bearer)
        assert body["choices"][0]["message"]["content"] == "" and body["choices"][0]["finish_reason"] == "length"
    with VLLMFake(max_model_len=2048) as fake:
        status, body = _post(
            fake,
            "/v1/chat/completions",
            {"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": user, "max_tokens": 4096},
            {"authorization": "Bearer vllm-test-key"},
        )
        assert (status, body["object"]) == (400, "error") and "maximum context length is 2048" in body["message"]


@pytest.mark.parametrize(
    ("name", "has_limits"), [("openai", True), ("azure", True), ("anthropic", True), ("gemini", False)]
)
def test_rate_limit_headers_litellm_hands_on_are_read_per_provider(name: str, has_limits: bool) -> None:
    import litellm

    spec = BY_NAME[name]
    with spec.fake() as fake:
        fake.answer = lambda messages: Reply("{}")
        response = litellm.completion(
            model=spec.model,
            messages=[{"role": "user", "content": "json please"}],
            api_base=fake.api_base,
            api_key=spec.api_key,
            max_tokens=10,
        )
    limits = read_rate_limits(response._hidden_params.get("additional_headers"), time.time())
    assert (limits.tokens_remaining is not None) is has_limits, limits
    if name in ("openai", "anthropic"):
        assert limits.tokens_limit and limits.requests_limit and limits.tokens_reset_seconds is not None


def test_cached_tokens_and_what_they_saved_are_on_the_item_and_the_batch_sheet(corpus: Corpus, tmp_path: Any) -> None:
    """A repair call repeats the paper's prompt: the provider serves it from its cache, and the
    document and the workbook's Batch sheet count the cached tokens and what they saved."""
    import openpyxl

    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.extraction.extract import extract_item
    from extraction_pipeline.core.ledger.queries import batch_item_rows, progress

    spec = BY_NAME["openai"]
    with OpenAIFake() as fake:
        fake.answer = _oracle_answer(corpus)
        fake.push(Reply("I could not find a JSON answer"))  # the first answer is no JSON: one repair call
        batch = create_batch(
            corpus.ledger,
            idempotency_key="matrix-cache",
            project="matrix",
            user="u",
            document_ids=corpus.documents[:1],
            fresh=True,  # the openai row may have paid for this prompt already: ask again
        ).id
        [item] = batch_item_rows(corpus.ledger, batch)
        outcome = extract_item(
            corpus.ledger,
            item_id=item["id"],
            run_id="r",
            worker="w",
            parsed=corpus.parsed[item["sha256"]],
            llm=_config(spec, fake),
        )
        assert outcome.status == "completed" and fake.violations == []
        served = [a.cached_tokens for a in fake.answered]
    assert served[0] == 0 and served[1] >= 1024  # the repair read the first call's prefix
    stored = states.get_item(corpus.ledger, item["id"])
    assert stored is not None and stored["cached_tokens"] == served[1] and stored["saved_usd"] > 0
    totals = progress(corpus.ledger, batch)
    assert totals.cached_tokens == served[1] and totals.saved_usd == pytest.approx(stored["saved_usd"], abs=1e-6)
    book = openpyxl.load_workbook(write_workbook(corpus.ledger, batch, tmp_path / "cache.xlsx"))
    sheet = {row[0]: row[1] for row in book["Batch"].iter_rows(values_only=True) if row and row[0]}
    assert sheet["cached_tokens"] == served[1] and sheet["saved_usd"] == pytest.approx(stored["saved_usd"], abs=1e-6)
    assert sheet["cost_usd"] == pytest.approx(stored["cost_usd"], abs=1e-6) and sheet["tokens_in"] > served[1]


def test_cache_writes_and_reads_are_priced_on_the_item_and_the_batch_sheet_as_the_batch_asks(
    corpus: Corpus, tmp_path: Any
) -> None:
    """Anthropic, through the extraction: without the follow-up the paper is sent unmarked (no read
    is expected: only the template is written, a surcharge the next documents read back); with it,
    the first ask writes the paper and the follow-up reads it, and the document's saving is net of
    the writes, on the item and on the Batch sheet."""
    import openpyxl

    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.extraction.extract import extract_item
    from extraction_pipeline.core.ledger.queries import batch_item_rows

    spec = BY_NAME["anthropic"]
    results = {}
    for follow_up in (False, True):
        with AnthropicFake() as fake:
            fake.answer = _oracle_answer(corpus)
            batch = create_batch(
                corpus.ledger,
                idempotency_key=f"matrix-cache-marks-{follow_up}",
                project="matrix",
                user="u",
                document_ids=corpus.documents[:1],
                fresh=True,
                follow_up=follow_up,
            ).id
            [item] = batch_item_rows(corpus.ledger, batch)
            parsed = corpus.parsed[item["sha256"]]
            outcome = extract_item(
                corpus.ledger, item_id=item["id"], run_id="r", worker="w", parsed=parsed, llm=_config(spec, fake)
            )
            assert outcome.status == "completed" and fake.violations == []
            marked = ["cache_control" in json.dumps(r.body["messages"]) for r in fake.requests]
            answered = list(fake.answered)
        stored = states.get_item(corpus.ledger, item["id"])
        assert stored is not None
        results[follow_up] = (batch, outcome, marked, answered, stored)
    _, alone, marked, answered, stored = results[False]
    assert "follow_up" not in alone.result and marked == [False]  # the paper unmarked: nobody reads it again
    system_tokens = answered[0].cache_written
    assert 1024 <= system_tokens < answered[0].prompt_tokens / 2  # the template (the system prompt) only
    assert stored["cache_written_tokens"] == system_tokens and stored["cached_tokens"] == 0
    assert stored["saved_usd"] < 0  # written at 1.25x, read by nobody yet: a surcharge, shown as such
    batch, asked, marked, answered, stored = results[True]
    assert asked.result["follow_up"]["asked"] and marked == [True, True]  # first ask and follow-up marked
    assert answered[0].cache_written == answered[0].prompt_tokens  # the template and the paper written
    assert answered[1].cached_tokens == answered[0].prompt_tokens and answered[1].cache_written == 0
    assert stored["cache_written_tokens"] == answered[0].cache_written
    assert stored["cached_tokens"] == answered[1].cached_tokens and stored["saved_usd"] > 0
    book = openpyxl.load_workbook(write_workbook(corpus.ledger, batch, tmp_path / "marks.xlsx"))
    sheet = {row[0]: row[1] for row in book["Batch"].iter_rows(values_only=True) if row and row[0]}
    assert sheet["cache_written_tokens"] == stored["cache_written_tokens"]
    assert sheet["cached_tokens"] == stored["cached_tokens"]
    assert sheet["saved_usd"] == pytest.approx(stored["saved_usd"], abs=1e-6)


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_the_estimate_counts_the_cache_reads_and_writes_the_batch_then_meets(corpus: Corpus, name: str) -> None:
    """One slot, two papers, one after the other: the first writes the template to the cache, the
    second reads it. The estimate's prompt tokens, cache figures and cost against what the provider
    then reported."""
    from extraction_pipeline.core.extraction.estimate import estimate_batch
    from extraction_pipeline.core.extraction.extract import extract_item
    from extraction_pipeline.core.ledger.queries import batch_item_rows, progress

    spec = BY_NAME[name]
    with spec.fake() as fake:
        fake.answer = _oracle_answer(corpus)
        llm = _config(spec, fake)
        [model] = estimate_batch(
            corpus.ledger, project="matrix", document_ids=corpus.documents, llm=llm, fresh=True, llm_slots=1
        ).models
        batch = create_batch(
            corpus.ledger,
            idempotency_key=f"matrix-estimate-cache-{name}",
            project="matrix",
            user="u",
            document_ids=corpus.documents,
            fresh=True,
        ).id
        for item in batch_item_rows(corpus.ledger, batch):
            parsed = corpus.parsed[item["sha256"]]
            outcome = extract_item(corpus.ledger, item_id=item["id"], run_id="r", worker="w", parsed=parsed, llm=llm)
            assert outcome.status == "completed"
        assert fake.violations == []
        read = sum(a.cached_tokens for a in fake.answered)
        written = sum(a.cache_written for a in fake.answered)
    spent = progress(corpus.ledger, batch)
    assert model.calls == len(fake.answered) == 2 and model.cache_read_tokens >= 1024
    assert spent.cached_tokens == read and spent.cache_written_tokens == written
    # The template (at OpenAI after the response schema, which it bills and caches as the prompt's
    # first part), counted by litellm's tokenizer and the fake's: within 10%, and the cost.
    assert model.prompt_tokens == pytest.approx(spent.tokens_in, rel=0.10)
    assert model.cache_read_tokens == pytest.approx(read, rel=0.10)
    assert model.cache_written_tokens == pytest.approx(written, rel=0.10)
    # Priced as estimated, with the answers' real length (the expected one is the median of the
    # model's earlier answers in this ledger, which other tests add to).
    priced = model.price.cached_cost(
        model.prompt_tokens, spent.tokens_out, read=model.cache_read_tokens, written=model.cache_written_tokens
    )
    assert priced is not None and priced == pytest.approx(spent.cost_usd, rel=0.10)


def test_a_gemini_recitation_stop_is_asked_again_quoting_less_and_named_when_it_persists(corpus: Corpus) -> None:
    from extraction_pipeline.core.errors import WithheldError
    from extraction_pipeline.core.llm.gateway import QUOTE_LESS

    spec = BY_NAME["gemini"]
    one = _paper(corpus, 0)
    messages = build_messages(RCT_TEMPLATE, one.pages_text, one.tables)
    with GeminiFake() as fake:
        fake.answer = _oracle_answer(corpus)
        fake.push(Reply("{}", finish="recitation"))
        answered = complete_extraction(_config(spec, fake), messages, RCT_TEMPLATE)
        asked = [json.dumps(a.request.body) for a in fake.answered]  # (a schema refusal is not answered)
        fake.push(Reply("{}", finish="recitation"), Reply("{}", finish="recitation"))
        with pytest.raises(WithheldError, match=r"withheld the answer twice .*RECITATION") as twice:
            complete_extraction(_config(spec, fake), messages, RCT_TEMPLATE)
        assert fake.violations == [] and len(fake.answered) == 4
    assert QUOTE_LESS not in asked[0] and QUOTE_LESS in asked[1]  # the second ask quotes less
    assert answered.output.model_dump()["outcomes"]  # answered the second time
    assert answered.usage.tokens_in > 2 * 5000  # both calls paid for and counted
    assert twice.value.usage is not None and twice.value.usage.tokens_in > 2 * 5000
    with OpenAIFake() as fake:  # another provider's content filter is not a recitation: not asked again
        fake.answer = _oracle_answer(corpus)
        fake.push(FILTERED_ANSWER)
        with pytest.raises(WithheldError, match=r"withheld the answer \(finish_reason content_filter"):
            complete_extraction(_config(BY_NAME["openai"], fake), messages, RCT_TEMPLATE)
        assert len(fake.requests) == 1


def test_every_paid_answer_is_counted_when_a_re_ask_or_its_repair_fails(corpus: Corpus) -> None:
    """Withheld, asked again quoting less, answered with no JSON, repaired, and the repair withheld:
    the error carries all three answers' tokens (each was paid for)."""
    from extraction_pipeline.core.errors import WithheldError

    one = _paper(corpus, 0)
    messages = build_messages(RCT_TEMPLATE, one.pages_text, one.tables)
    with GeminiFake() as fake:
        fake.push(Reply("{}", finish="recitation"), Reply("no JSON here"), Reply("{}", finish="recitation"))
        with pytest.raises(WithheldError) as raised:
            complete_extraction(_config(BY_NAME["gemini"], fake), messages, RCT_TEMPLATE)
        paid = [a.prompt_tokens for a in fake.answered]
    assert len(paid) == 3 and raised.value.usage is not None
    assert raised.value.usage.tokens_in == sum(paid)
