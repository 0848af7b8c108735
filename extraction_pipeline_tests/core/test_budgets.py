"""The provider's budget kept for the whole instance (SQLite and PostgreSQL): calls wait their turn
instead of being refused, in order, with unused answers given back; limits learned from the
provider's headers; and, over real HTTP to a fake that meters like OpenAI, no call refused."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from extraction_pipeline.core.errors import PermanentError, TransientError
from extraction_pipeline.core.extraction.prompts import build_messages
from extraction_pipeline.core.ledger import Ledger, budgets
from extraction_pipeline.core.ledger.budgets import (
    LEARNED_FRESH_SECONDS,
    Budget,
    LedgerBudget,
    configure,
    get_budget,
    learn,
    refused,
    reserve,
    settle,
    unhinted_wait,
    waiting_budgets,
    what_calls_wait_for,
)
from extraction_pipeline.core.ledger.schema import provider_budgets
from extraction_pipeline.core.llm.config import ANSWER_TOKENS
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction
from extraction_pipeline.core.llm.rate_headers import RateLimits, read_rate_limits
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline_tests.support.extraction_cases import GOOD, PARSED
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, ProviderMeter, Reply
from extraction_pipeline_tests.support.providers import AnthropicFake, OpenAIFake
from extraction_pipeline_tests.support.providers import Reply as ProviderReply
from extraction_pipeline_tests.support.providers.anthropic import AnthropicMeter

MODEL = "openai/fake-model"
T0 = 1_000_000.0


def test_calls_wait_their_turn_in_order_and_unused_answers_are_given_back(ledger: Ledger) -> None:
    configure(ledger, MODEL, tokens_per_minute=60_000, requests_per_minute=None)  # 1,000 tokens/s
    first = reserve(ledger, MODEL, 30_000, now=T0)
    second = reserve(ledger, MODEL, 30_000, now=T0)
    third = reserve(ledger, MODEL, 30_000, now=T0)
    assert (first.wait_seconds, second.wait_seconds) == (0.0, 0.0)  # one minute's allowance at once
    assert third.wait_seconds == pytest.approx(30.0)  # then at the budget's rate, in order
    settle(ledger, first, 10_000)  # answered using 10k of its 30k: 20k back
    assert reserve(ledger, MODEL, 10_000, now=T0).wait_seconds == pytest.approx(20.0)
    with pytest.raises(PermanentError, match="more than its whole budget of 60000 tokens/min"):
        reserve(ledger, MODEL, 60_001, now=T0)
    budget = get_budget(ledger, MODEL)
    assert budget is not None and budget.tokens_in_use(T0) == 60_000
    assert budget.describe(T0) == "openai/fake-model's budget: 60k of 60k tokens/min in use"
    assert budget.tokens_in_use(T0 + 600) == 0  # ten minutes later, all replenished


def test_requests_per_minute_and_an_unknown_budget(ledger: Ledger) -> None:
    assert reserve(ledger, MODEL, 10**9, now=T0).wait_seconds == 0.0  # nothing known: no waiting
    configure(ledger, MODEL, tokens_per_minute=None, requests_per_minute=2)
    waits = [reserve(ledger, MODEL, 1, now=T0).wait_seconds for _ in range(4)]
    assert waits == pytest.approx([0.0, 0.0, 30.0, 60.0])


def test_the_providers_headers_set_the_limit_and_correct_the_budget(ledger: Ledger) -> None:
    openai = read_rate_limits(
        {
            "llm_provider-x-ratelimit-limit-tokens": "40000",
            "x-ratelimit-remaining-tokens": "10000",
            "x-ratelimit-reset-tokens": "45s",
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
        },
        T0,
    )
    assert openai == RateLimits(40_000, 10_000, 45.0, 500, 499, 0.12)
    reset = datetime.fromtimestamp(T0 + 30, UTC).isoformat().replace("+00:00", "Z")
    anthropic = read_rate_limits(
        {"anthropic-ratelimit-tokens-limit": "80000", "anthropic-ratelimit-tokens-reset": reset}, T0
    )
    assert anthropic.tokens_limit == 80_000 and anthropic.tokens_reset_seconds == pytest.approx(30.0)
    assert read_rate_limits({"x-ratelimit-reset-tokens": "6m0s"}, T0).tokens_reset_seconds == 360.0
    assert read_rate_limits({"x-ratelimit-limit-tokens": "lots"}, T0).empty  # nonsense is ignored

    learn(ledger, MODEL, openai, now=T0)  # another client on the account spent 30k of 40k
    budget = get_budget(ledger, MODEL)
    assert budget is not None and (budget.tokens_per_minute, budget.requests_per_minute) == (40_000, 500)
    assert budget.tokens_in_use(T0) == 30_000
    assert reserve(ledger, MODEL, 20_000, now=T0).wait_seconds == pytest.approx(15.0)  # 10k fit, 10k wait
    configure(ledger, MODEL, tokens_per_minute=20_000, requests_per_minute=None)  # the user's is lower
    assert get_budget(ledger, MODEL).tokens_per_minute == 20_000  # type: ignore[union-attr]


def test_a_refusal_holds_every_call_until_its_retry_after(ledger: Ledger) -> None:
    refused(ledger, MODEL, 12.0, now=T0)
    assert reserve(ledger, MODEL, 100, now=T0).wait_seconds == pytest.approx(12.0)  # even with no limit known
    assert reserve(ledger, MODEL, 100, now=T0 + 13).wait_seconds == 0.0


def test_reservations_from_many_threads_all_count(ledger: Ledger) -> None:
    configure(ledger, MODEL, tokens_per_minute=600_000, requests_per_minute=None)  # 10,000 tokens/s
    waits: list[float] = []

    def reserve_ten() -> None:
        waits.extend(reserve(ledger, MODEL, 60_000, now=T0).wait_seconds for _ in range(10))

    threads = [threading.Thread(target=reserve_ten) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 40 reservations of 6 s each: the first 10 fit the minute, then one every 6 s; none lost or doubled
    assert sorted(waits) == pytest.approx([max(0.0, 6.0 * n - 60.0) for n in range(1, 41)])


def test_many_workers_contending_for_one_budget_all_get_their_turn(ledger: Ledger) -> None:
    """24 workers reserving at once (SQLite and PostgreSQL): contention for the one row is waited
    out, never a failure; every reservation counts once."""
    configure(ledger, MODEL, tokens_per_minute=6_000_000, requests_per_minute=None)  # 100,000 tokens/s
    waits: list[float] = []
    failures: list[BaseException] = []

    def reserve_five() -> None:
        try:
            waits.extend(reserve(ledger, MODEL, 60_000, now=T0).wait_seconds for _ in range(5))
        except BaseException as exc:  # any failure is what the test looks for
            failures.append(exc)

    threads = [threading.Thread(target=reserve_five) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    # 120 reservations of 0.6 s each: 100 fit the minute, then one every 0.6 s
    assert sorted(waits) == pytest.approx([max(0.0, 0.6 * n - 60.0) for n in range(1, 121)])


def _config(fake: FakeLLMServer, ledger: Ledger | None) -> LLMConfig:
    return LLMConfig(
        model=MODEL,
        api_base=fake.api_base,
        api_key="sk-test",
        output_tokens=500,
        budget=LedgerBudget(ledger) if ledger is not None else None,
    )


def test_against_a_metered_provider_calls_are_paced_not_refused(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    messages = build_messages(RCT_TEMPLATE, [PARSED.pages_text[0] * 40])  # a prompt of some thousands of tokens
    cost = ProviderMeter.estimate({"messages": messages, "max_tokens": 500})
    budget = 5 * cost  # the account's minute takes five such calls: the sixth must wait (~7 s)
    fake_llm.answer = lambda messages: Reply(GOOD)

    fake_llm.meter = ProviderMeter(tokens_per_minute=budget)
    unpaced = [_call(_config(fake_llm, None), messages) for _ in range(6)]
    assert fake_llm.meter.refused >= 1 and "rate limit" in " ".join(unpaced).lower()  # the fake does meter

    fake_llm.meter = ProviderMeter(tokens_per_minute=budget)
    configure(ledger, MODEL, tokens_per_minute=budget, requests_per_minute=None)
    waited: list[float] = []
    config = _config(fake_llm, ledger)
    assert config.budget is not None
    config.budget.on_wait = lambda model, left, _: waited.append(left)  # type: ignore[attr-defined]
    paced = [_call(config, messages) for _ in range(6)]
    assert paced == ["ok"] * 6 and fake_llm.meter.refused == 0  # every call fit when it was sent
    assert waited  # some calls waited for the budget (the run's log says so)


def _call(config: LLMConfig, messages: list[dict[str, str]]) -> str:
    try:
        complete_extraction(config, messages, RCT_TEMPLATE)
    except Exception as exc:
        return str(exc)
    return "ok"


def test_what_calls_wait_for_is_said_in_words(ledger: Ledger) -> None:
    assert what_calls_wait_for(ledger) == []
    configure(ledger, MODEL, tokens_per_minute=40_000, requests_per_minute=None)
    now = time.time()
    reserve(ledger, MODEL, 38_000, now=now)
    assert waiting_budgets(ledger, now) == []  # within the minute's allowance: nobody waits
    reserve(ledger, MODEL, 10_000, now=now)  # this one waits
    assert waiting_budgets(ledger, now) == [
        "waiting for openai/fake-model's token budget: 40k of 40k tokens/min in use"
    ]
    refused(ledger, "anthropic/other", 30.0, now=now)
    said = waiting_budgets(ledger, now)
    assert said[0].startswith("waiting for anthropic/other: the provider asked for no calls before ")
    assert len(said) == 2 and what_calls_wait_for(ledger) == waiting_budgets(ledger)


def test_the_batch_sheet_reports_tokens_per_minute_achieved_against_the_budget(ledger: Ledger, tmp_path: Path) -> None:
    from datetime import timedelta

    import openpyxl
    from sqlalchemy import update

    from extraction_pipeline.core.export.workbook import write_workbook
    from extraction_pipeline.core.ledger.batches import create_batch
    from extraction_pipeline.core.ledger.schema import batch_items
    from extraction_pipeline_tests.support.ledgers import add_documents

    batch = create_batch(ledger, idempotency_key="b", project="p", user="u", document_ids=add_documents(ledger, 2)).id
    start = datetime(2026, 12, 1, 9, 0, 0)
    with ledger.engine.begin() as conn:  # two documents: 30,000 tokens over two minutes
        for n, item in enumerate((1, 2)):
            conn.execute(
                update(batch_items)
                .where(batch_items.c.id == item)
                .values(
                    status="completed",
                    model=MODEL,
                    tokens_in=14_000,
                    tokens_out=1_000,
                    started_at=start + timedelta(seconds=60 * n),
                    finished_at=start + timedelta(seconds=60 * n + 60),
                )
            )
    configure(ledger, MODEL, tokens_per_minute=20_000, requests_per_minute=None)
    book = openpyxl.load_workbook(write_workbook(ledger, batch, tmp_path / "b.xlsx"))
    rows = {row[0]: row[1] for row in book["Batch"].iter_rows(values_only=True) if row and row[0]}
    assert rows[f"tokens/min achieved, {MODEL}"] == "15,000 of a budget of 20,000 (75%)"


def _storm(fake: FakeLLMServer, refusals: int, retry_after: str) -> None:
    """OpenAI's answer to an account over its limit, ``refusals`` times, then the extraction."""
    body = "Rate limit reached for fake-model in organization org-fake on tokens per min (TPM)"
    fake.push(*[Reply(status=429, error_message=body, headers={"retry-after": retry_after})] * refusals, Reply(GOOD))


def test_a_rate_limit_refusal_is_waited_out_in_the_call_and_told_once(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    messages = build_messages(RCT_TEMPLATE, [PARSED.pages_text[0]])
    _storm(fake_llm, 2, "1")
    told: list[tuple[str, float]] = []
    config = _config(fake_llm, ledger)
    assert isinstance(config.budget, LedgerBudget)
    config.budget.on_refusal = lambda cause, seconds: told.append((cause, seconds))
    started = time.monotonic()
    assert _call(config, messages) == "ok"  # two refusals waited out, the third request answered
    assert len(fake_llm.requests) == 3 and time.monotonic() - started >= 2.0  # each Retry-After was honoured
    assert [seconds for _, seconds in told] == [1.0, 1.0]
    assert told[0][0].startswith("HTTP 429 RateLimitError: Rate limit reached for fake-model")
    budget = get_budget(ledger, MODEL)
    assert budget is not None and budget.paused_until > 0  # every other call of the model waited too


def test_a_refusal_is_raised_without_a_budget_or_beyond_what_a_call_waits_out(
    ledger: Ledger, fake_llm: FakeLLMServer
) -> None:
    messages = build_messages(RCT_TEMPLATE, [PARSED.pages_text[0]])
    _storm(fake_llm, 1, "1")
    assert _call(_config(fake_llm, None), messages).startswith("HTTP 429 RateLimitError")  # nobody to pace it
    fake_llm.reset()
    fake_llm.push(Reply(status=503, error_message="overloaded", headers={"retry-after": "1"}), Reply(GOOD))
    assert _call(_config(fake_llm, ledger), messages).startswith("HTTP 503")  # not a rate limit: an outage's
    fake_llm.reset()
    _storm(fake_llm, 1, "3600")  # out of quota for an hour: the step's retries and the breaker decide
    assert _call(_config(fake_llm, ledger), messages).startswith("HTTP 429 RateLimitError")
    assert len(fake_llm.requests) == 1
    budget = get_budget(ledger, MODEL)  # and the model's other calls wait as the provider asked
    assert budget is not None and budget.paused_until >= time.time() + 3500


def test_before_the_provider_has_said_anything_one_call_goes_first(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    """Calls sent blind at a metered account are refused at the start of every batch: the first
    call goes alone, the others wait for what its answer says, then go as the budget allows."""
    messages = build_messages(RCT_TEMPLATE, [PARSED.pages_text[0] * 40])
    cost = ProviderMeter.estimate({"messages": messages, "max_tokens": 500})
    fake_llm.answer = lambda messages: Reply(GOOD)
    # The minute takes two and a half such calls: three sent blind at once, one would be refused;
    # sent as the budget allows, the third waits for half a call's tokens (12 s, not 30).
    fake_llm.meter = ProviderMeter(tokens_per_minute=5 * cost // 2)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(_call(_config(fake_llm, ledger), messages))) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert results == ["ok"] * 3
    assert fake_llm.meter.refused == 0  # blind, three at once, at least one would have been refused
    budget = get_budget(ledger, MODEL)
    assert budget is not None and budget.learned_tokens == 5 * cost // 2 and budget.answers_seen >= 1


def test_a_probe_that_fails_silently_hands_the_probe_on_and_a_silent_provider_is_not_waited_for(
    ledger: Ledger,
) -> None:
    probe = reserve(ledger, MODEL, 1000, now=T0)
    assert probe.probe and probe.wait_seconds == 0
    second = reserve(ledger, MODEL, 1000, now=T0 + 1)
    assert second.again and not second.probe  # waits for the probe's answer, then asks again
    LedgerBudget(ledger).after_refusal(probe, None, None)  # an outage: nothing learned
    again = reserve(ledger, MODEL, 1000, now=T0 + 2)
    assert again.probe  # the next call asks the provider first
    assert reserve(ledger, MODEL, 1000, now=T0 + 2 + 31).probe  # a probe whose worker died lapses
    LedgerBudget(ledger).after_call(again, 900, {})  # answered, without rate-limit headers
    after = [reserve(ledger, MODEL, 1000, now=T0 + 40) for _ in range(3)]
    assert [(r.again, r.wait_seconds) for r in after] == [(False, 0.0)] * 3  # a provider that tells nothing


def test_what_the_provider_said_is_trusted_for_a_day_then_one_call_asks_again(ledger: Ledger) -> None:
    """A batch started within a day of the provider's last word starts with every call free to go
    (no probe: it cost a whole call's latency with the pool idle); after a day one call asks again
    while the others wait for its answer; limits the user configured never need asking."""
    headers = {"x-ratelimit-limit-tokens": "40000", "x-ratelimit-remaining-tokens": "40000"}
    now = time.time()
    probe = reserve(ledger, MODEL, 1000, now=now)
    assert probe.probe
    LedgerBudget(ledger).after_call(probe, 900, headers)
    later = [reserve(ledger, MODEL, 1000, now=now + 3600) for _ in range(3)]  # the next batch, an hour on
    assert [(r.probe, r.again, r.budget is not None) for r in later] == [(False, False, True)] * 3
    stale = now + LEARNED_FRESH_SECONDS + 60
    asks = reserve(ledger, MODEL, 1000, now=stale)
    assert asks.probe and asks.budget is None  # nothing reserved against limits no longer trusted
    assert reserve(ledger, MODEL, 1000, now=stale + 1).again  # the others wait for its answer
    LedgerBudget(ledger).after_call(asks, 900, headers)  # heard again: trusted again
    assert not reserve(ledger, MODEL, 1000, now=time.time() + 60).probe
    # With a limit configured nothing is asked, and a lower learned one keeps applying: forgetting
    # it would send a burst the provider refuses.
    configure(ledger, MODEL, tokens_per_minute=100_000, requests_per_minute=None)
    configured = reserve(ledger, MODEL, 1000, now=time.time() + 2 * LEARNED_FRESH_SECONDS)
    assert not configured.probe and not configured.again and configured.budget is not None
    assert configured.budget.tokens_per_minute == 40_000


def _another_worker_wins(ledger: Ledger, monkeypatch: pytest.MonkeyPatch, times: int | None) -> dict[str, int]:
    """Between each read of the budget and its compare-and-set, another worker's reservation lands
    first (a real write on its own connection): ``times`` times (None: always)."""
    real = budgets._compare_and_set
    lost = {"races": 0}

    def racing(conn_ledger: Ledger, budget: Budget, *args: Any, **kwargs: Any) -> bool:
        if times is None or lost["races"] < times:
            lost["races"] += 1
            with ledger.engine.begin() as conn:
                conn.execute(
                    update(provider_budgets)
                    .where(provider_budgets.c.model == budget.model)
                    .values(tokens_ready_at=provider_budgets.c.tokens_ready_at + 0.001)
                )
        return bool(real(conn_ledger, budget, *args, **kwargs))

    monkeypatch.setattr(budgets, "_compare_and_set", racing)
    monkeypatch.setattr(budgets, "_LONGEST_PAUSE", 0.002)  # the pauses' length is not what is tested
    return lost


def test_a_reservation_that_loses_the_race_hundreds_of_times_waits_its_turn(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(ledger, MODEL, tokens_per_minute=6_000_000, requests_per_minute=None)
    lost = _another_worker_wins(ledger, monkeypatch, times=250)
    reservation = reserve(ledger, MODEL, 60_000, now=T0)
    assert lost["races"] == 250 and reservation.tokens == 60_000 and reservation.wait_seconds == 0.0
    budget = get_budget(ledger, MODEL)
    assert budget is not None and budget.tokens_ready_at == pytest.approx(T0 + 0.6)  # reserved once


def test_contention_that_never_ends_is_retried_later_not_a_failure(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(ledger, MODEL, tokens_per_minute=6_000_000, requests_per_minute=None)
    _another_worker_wins(ledger, monkeypatch, times=None)
    monkeypatch.setattr(budgets, "CONTENTION_SECONDS", 0.5)
    with pytest.raises(TransientError, match="other calls kept moving it; the call is retried later") as raised:
        reserve(ledger, MODEL, 60_000, now=T0)
    assert not isinstance(raised.value, PermanentError)


def test_a_429_without_retry_after_is_waited_out_as_its_reset_headers_say_in_the_same_call(ledger: Ledger) -> None:
    with OpenAIFake() as fake:
        fake.answer = lambda messages: ProviderReply(GOOD)
        fake.push(ProviderReply(status=429, error="rate_limit_unhinted"))  # no Retry-After, reset-tokens 4.2s
        refusals: list[float] = []
        budget = LedgerBudget(ledger, on_refusal=lambda cause, seconds: refusals.append(seconds))
        config = LLMConfig(
            model="openai/gpt-4o-mini", api_base=fake.api_base, api_key="sk-test", output_tokens=500, budget=budget
        )
        started = time.monotonic()
        complete_extraction(config, build_messages(RCT_TEMPLATE, [PARSED.pages_text[0]]), RCT_TEMPLATE)
        assert refusals == [pytest.approx(4.2)]  # the exhausted bucket's own reset time, not a guess
        assert time.monotonic() - started >= 4.0 and len(fake.answered) == 1  # waited, then answered
        assert fake.violations == []


def test_without_any_hint_the_wait_is_the_time_the_budget_takes_to_free_the_call(ledger: Ledger) -> None:
    configure(ledger, MODEL, tokens_per_minute=60_000, requests_per_minute=None)
    reservation = reserve(ledger, MODEL, 6_000, now=T0)
    assert unhinted_wait(ledger, reservation, RateLimits()) == pytest.approx(6.0)  # 6,000 of 60,000 a minute
    configure(ledger, MODEL, tokens_per_minute=None, requests_per_minute=30)
    assert unhinted_wait(ledger, reservation, RateLimits()) == pytest.approx(2.0)  # one of 30 requests a minute
    hinted = RateLimits(
        tokens_remaining=100, tokens_reset_seconds=9.5, requests_remaining=40, requests_reset_seconds=0.1
    )
    assert unhinted_wait(ledger, reservation, hinted) == pytest.approx(9.5)  # the tokens ran out, not the requests
    configure(ledger, "openai/unknown", tokens_per_minute=None, requests_per_minute=None)
    blind = reserve(ledger, "openai/unknown", 6_000, now=T0)
    assert unhinted_wait(ledger, blind, RateLimits()) is None  # nothing known: no guess, the step's backoff


def test_an_account_metering_output_apart_is_asked_within_its_output_allowance(ledger: Ledger) -> None:
    """Anthropic meters output tokens per minute from each call's max_tokens when it starts: an
    answer limit larger than the account's minute never starts. The first call (nothing known yet)
    is refused and tells the limit; every call after asks within it, and none is refused."""
    with AnthropicFake() as fake:
        fake.meter = AnthropicMeter(input_per_minute=400_000, output_per_minute=6_000)
        fake.answer = lambda messages: ProviderReply("{}")  # short answers: their unused output comes back at once
        config = LLMConfig(
            model="anthropic/claude-sonnet-4-5-20250929",
            api_base=fake.api_base,
            api_key="sk-ant-test",
            budget=LedgerBudget(ledger),
        )
        messages = build_messages(RCT_TEMPLATE, [PARSED.pages_text[0]])
        for _ in range(4):
            complete_extraction(config, messages, RCT_TEMPLATE)
        asked = [r.body["max_tokens"] for r in fake.requests]
    assert asked == [ANSWER_TOKENS, 6_000, 6_000, 6_000, 6_000]  # the refused first ask, then within the limit
    assert fake.meter.refused == 1 and len(fake.answered) == 4 and fake.violations == []
    budget = get_budget(ledger, "anthropic/claude-sonnet-4-5-20250929")
    assert budget is not None and budget.output_tokens_per_minute == 6_000 and budget.tokens_per_minute == 400_000
