"""Transient means transient (issue: nothing lost): real causes named, Retry-After honoured, time
budgets, one circuit breaker per model, database outages told apart from bugs — tested both ways
with real HTTP (litellm against the loopback fake), real SQLite files and a real PostgreSQL."""

from __future__ import annotations

import random
import socket
import threading
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, ProgrammingError

from extraction_pipeline.core.backoff import BreakerPolicy, RetrySchedule
from extraction_pipeline.core.errors import PermanentError, QuotaExhaustedError, RateLimitedError, TransientError
from extraction_pipeline.core.extraction.extract import extract_item
from extraction_pipeline.core.ledger import Ledger, utcnow
from extraction_pipeline.core.ledger import items as states
from extraction_pipeline.core.ledger.batches import create_batch
from extraction_pipeline.core.ledger.breakers import breaker_state, may_call, record_failure, record_success
from extraction_pipeline.core.ledger.outages import describe_database_outage, is_database_outage
from extraction_pipeline.core.ledger.schema import provider_breakers
from extraction_pipeline.core.llm.gateway import LLMConfig, complete_extraction
from extraction_pipeline.core.pdf.parsing import ParsedDocument
from extraction_pipeline.core.runs.reconcile import Action, ItemView, Limits, RunInfo, Verdict, judge_item
from extraction_pipeline.core.templates.rct import RCT_TEMPLATE
from extraction_pipeline_tests.support.fake_llm import FakeLLMServer, Reply, extraction_json
from extraction_pipeline_tests.support.ledgers import add_documents
from extraction_pipeline_tests.support.providers import GeminiFake, OpenAIFake

MESSAGES = [{"role": "user", "content": "extract"}]
GOOD = extraction_json({"metadata.nct_number": ("NCT01234567", "Trial registered as NCT01234567.")})
PARSED = ParsedDocument("sha", ["Trial registered as NCT01234567."])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens here once the socket is closed


def _config(api_base: str) -> LLMConfig:
    return LLMConfig(model="openai/fake-model", api_base=api_base, api_key="sk-test", timeout_seconds=10)


# --- the provider: real causes, Retry-After ---------------------------------------------------


def test_an_unreachable_provider_is_transient_and_named_connection_refused() -> None:
    with pytest.raises(TransientError) as raised:
        complete_extraction(_config(f"http://127.0.0.1:{_closed_port()}/v1"), MESSAGES, RCT_TEMPLATE)
    message = str(raised.value)
    # litellm calls this "InternalServerError (HTTP 500)"; no server answered at all.
    assert message.startswith("provider unreachable: connection refused"), message
    assert "500" not in message and raised.value.provider


def test_a_rate_limit_carries_the_providers_retry_after(fake_llm: FakeLLMServer) -> None:
    fake_llm.push(Reply(status=429, error_message="Rate limit reached, slow down", headers={"Retry-After": "7"}))
    with pytest.raises(TransientError) as raised:
        complete_extraction(_config(fake_llm.api_base), MESSAGES, RCT_TEMPLATE)
    assert raised.value.retry_after == 7.0
    assert str(raised.value).startswith("HTTP 429 RateLimitError: Rate limit reached, slow down")


def test_a_rate_limit_without_retry_after_has_no_hint_and_a_bad_key_is_permanent(fake_llm: FakeLLMServer) -> None:
    fake_llm.push(Reply(status=429), Reply(status=401, error_message="invalid key"))
    with pytest.raises(TransientError) as raised:
        complete_extraction(_config(fake_llm.api_base), MESSAGES, RCT_TEMPLATE)
    assert raised.value.retry_after is None
    with pytest.raises(PermanentError) as permanent:
        complete_extraction(_config(fake_llm.api_base), MESSAGES, RCT_TEMPLATE)
    assert not isinstance(permanent.value, TransientError) and "HTTP 401" in str(permanent.value)


# --- the ledger database: outage or bug -------------------------------------------------------


def test_a_refused_postgresql_connection_is_an_outage() -> None:
    engine = create_engine(f"postgresql+psycopg2://postgres@127.0.0.1:{_closed_port()}/x")
    with pytest.raises(OperationalError) as raised, engine.connect():
        pass
    assert is_database_outage(raised.value)
    assert describe_database_outage(raised.value).startswith("ledger database connection lost: connection to server")


def test_a_connection_killed_by_the_server_is_an_outage(pg_database: str) -> None:
    engine = create_engine(pg_database, poolclass=None)
    with engine.connect() as victim:
        pid = victim.execute(text("select pg_backend_pid()")).scalar_one()
        admin = create_engine(pg_database)
        with admin.connect() as conn:
            conn.execute(text("select pg_terminate_backend(:pid)"), {"pid": pid})
        admin.dispose()
        with pytest.raises(DBAPIError) as raised:
            victim.execute(text("select 1"))
    assert is_database_outage(raised.value), str(raised.value)
    engine.dispose()


def test_bugs_and_constraint_violations_are_not_outages(ledger: Ledger) -> None:
    with pytest.raises((OperationalError, ProgrammingError)) as missing, ledger.engine.connect() as conn:
        conn.execute(text("select * from no_such_table"))
    assert not is_database_outage(missing.value)
    row = {"model": "m", "failures": 1, "updated_at": utcnow()}
    with ledger.engine.begin() as conn:
        conn.execute(provider_breakers.insert().values(**row))
    with pytest.raises(IntegrityError) as duplicate, ledger.engine.begin() as conn:
        conn.execute(provider_breakers.insert().values(**row))
    assert not is_database_outage(duplicate.value)
    assert not is_database_outage(ValueError("server closed the connection"))  # not a database error


def test_sqlite_busy_is_an_outage() -> None:
    error = OperationalError("UPDATE batch_items", {}, Exception("database is locked"))
    assert is_database_outage(error)


# --- the schedule: time, not a count ----------------------------------------------------------


def test_waits_grow_with_jitter_up_to_the_cap_and_stop_when_the_budget_is_spent() -> None:
    schedule = RetrySchedule(budget_seconds=1800, base_seconds=10, max_delay_seconds=300, jitter=0.25)
    rng = random.Random(7)  # noqa: S311  (repeatable jitter, not cryptography)
    waits = [schedule.delay(attempt, rng) for attempt in range(8)]
    for attempt, wait in enumerate(waits):
        nominal = min(300, 10 * 2**attempt)
        assert nominal * 0.75 <= wait <= nominal * 1.25
    assert max(waits) <= 375
    # A 30-minute budget is more than the three quick attempts of old: keep retrying for 29 min.
    assert schedule.next_wait(attempt=20, failing_for=29 * 60, rng=rng) is not None
    assert schedule.next_wait(attempt=20, failing_for=30 * 60, rng=rng) is None
    # The last wait ends with the budget, and Retry-After is never cut short before that.
    assert schedule.next_wait(attempt=9, failing_for=1795, rng=rng) == 5
    assert schedule.next_wait(attempt=0, failing_for=0, retry_after=60, rng=rng) == 60


def test_breaker_opens_after_consecutive_failures_and_at_once_on_retry_after() -> None:
    policy = BreakerPolicy(failures=3, base_cooldown_seconds=10, max_cooldown_seconds=300)
    assert [policy.cooldown(n) for n in (1, 2)] == [None, None]
    assert [policy.cooldown(n) for n in (3, 4, 5, 12)] == [10, 20, 40, 300]
    assert policy.cooldown(1, retry_after=30) == 30


# --- the breaker in the ledger ----------------------------------------------------------------


def test_breaker_state_is_shared_counted_under_concurrency_and_closed_by_success(ledger: Ledger) -> None:
    policy = BreakerPolicy(failures=3, base_cooldown_seconds=60, max_cooldown_seconds=600)
    barrier = threading.Barrier(8)

    def fail_once() -> None:
        barrier.wait()
        record_failure(ledger, "openai/x", "HTTP 503 ServiceUnavailableError: down", policy=policy)

    threads = [threading.Thread(target=fail_once) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    state = breaker_state(ledger, "openai/x")
    assert state is not None and state.failures == 8 and state.is_open()
    assert state.describe().startswith("waiting for the provider openai/x since ")
    assert "HTTP 503" in state.describe() and "new calls paused until" in state.describe()
    assert breaker_state(ledger, "openai/other") is None  # one breaker per model
    record_success(ledger, "openai/x")
    assert breaker_state(ledger, "openai/x") is None


def test_an_open_breaker_means_no_call_and_an_untouched_item(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    [doc] = add_documents(ledger, 1)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc])
    record_failure(ledger, "openai/fake-model", "HTTP 429", policy=BreakerPolicy(), retry_after=60)
    outcome = extract_item(ledger, item_id=1, run_id="r", worker="w", parsed=PARSED, llm=_config(fake_llm.api_base))
    assert outcome.status == "waiting" and outcome.wait_until is not None
    assert fake_llm.requests == []
    row = states.get_item(ledger, 1)
    assert row is not None and (row["status"], row["attempts"], row["failing_since"]) == ("pending", 0, None)


def test_provider_failures_open_the_breaker_and_a_success_closes_it(ledger: Ledger, fake_llm: FakeLLMServer) -> None:
    doc_ids = add_documents(ledger, 4)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    policy = BreakerPolicy(failures=2, base_cooldown_seconds=0.01, max_cooldown_seconds=0.01)
    fake_llm.push(Reply(status=503), Reply(status=503), Reply(GOOD))
    for item in (1, 2):
        with pytest.raises(TransientError):
            extract_item(
                ledger,
                item_id=item,
                run_id="r",
                worker="w",
                parsed=PARSED,
                llm=_config(fake_llm.api_base),
                breaker=policy,
            )
        row = states.get_item(ledger, item)
        assert row is not None and row["status"] == "pending" and row["failing_since"] is not None
    state = breaker_state(ledger, "openai/fake-model")
    assert state is not None and state.failures == 2 and state.open_until is not None
    with ledger.engine.begin() as conn:  # the cooldown is over: the next call is the probe
        conn.execute(provider_breakers.update().values(open_until=utcnow() - timedelta(seconds=1)))
    outcome = extract_item(
        ledger, item_id=3, run_id="r", worker="w", parsed=PARSED, llm=_config(fake_llm.api_base), breaker=policy
    )
    assert outcome.status == "completed" and breaker_state(ledger, "openai/fake-model") is None


def test_no_credit_left_stops_the_models_calls_at_once_and_says_why(ledger: Ledger) -> None:
    """OpenAI's 429 ``insufficient_quota`` is no rate limit: the first document goes back to wait
    (nothing lost), the breaker opens at once for a long pause naming the cause, and the next
    document sends nothing."""
    doc_ids = add_documents(ledger, 2)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=doc_ids)
    with OpenAIFake() as fake:
        llm = LLMConfig(model="openai/gpt-4o-mini", api_base=fake.api_base, api_key="sk-test", timeout_seconds=10)
        fake.push(Reply(status=429, error="insufficient_quota"))
        with pytest.raises(QuotaExhaustedError) as raised:
            extract_item(ledger, item_id=1, run_id="r", worker="w", parsed=PARSED, llm=llm)
        assert str(raised.value).startswith("the provider says the account has no credit left: You exceeded")
        row = states.get_item(ledger, 1)
        assert row is not None and row["status"] == "pending"
        state = breaker_state(ledger, "openai/gpt-4o-mini")
        assert state is not None and state.is_open() and "no credit left" in state.describe()
        assert state.open_until is not None and state.open_until > utcnow() + timedelta(minutes=9)
        sent = len(fake.requests)
        outcome = extract_item(ledger, item_id=2, run_id="r", worker="w", parsed=PARSED, llm=llm)
        assert outcome.status == "waiting" and len(fake.requests) == sent


def test_a_per_minute_quota_in_the_same_words_is_a_rate_limit_not_no_credit() -> None:
    """Gemini says "You exceeded your current quota" for its per-minute limits too: only OpenAI's
    ``insufficient_quota`` code (or Anthropic's "credit balance is too low") means no credit."""
    with GeminiFake() as fake:
        fake.push(Reply(status=429, error="rate_limit"))
        llm = LLMConfig(model="gemini/gemini-2.5-flash", api_base=fake.api_base, api_key="k", timeout_seconds=10)
        with pytest.raises(RateLimitedError) as raised:
            complete_extraction(llm, MESSAGES, RCT_TEMPLATE)
    assert "exceeded your current quota" in str(raised.value) and not isinstance(raised.value, QuotaExhaustedError)


# --- the reconcile's verdicts -----------------------------------------------------------------


def _view(status: str = "extracting", round_: int = 0, retry_round: int = 0) -> ItemView:
    return ItemView(id=1, status=status, message=None, dispatch_round=round_, retry_round=retry_round)


def test_judge_leaves_alive_and_recent_runs_alone_and_never_restarts_a_canceled_one() -> None:
    limits = Limits(grace_seconds=30, max_rounds=3)

    def judge(view: ItemView, *runs: RunInfo) -> Verdict | None:
        return judge_item(view, runs=list(runs), now=1000, launcher_finished=True, limits=limits)

    assert judge(_view(), RunInfo("a", "FAILURE", 0, 10), RunInfo("b", "QUEUED", 20, None)) is None
    assert judge(_view(), RunInfo("a", "FAILURE", 0, 990)) is None  # within the grace period
    canceled = judge(_view(), RunInfo("c", "CANCELED", 0, 10, user="ann"))
    assert canceled is not None and canceled.action == Action.FAIL
    assert canceled.message == "canceled by ann (run c); not retried automatically"
    dead = judge(_view(), RunInfo("d", "FAILURE", 0, 10))
    assert dead is not None and dead.action == Action.REQUEUE and "run d ended FAILURE while extracting" in dead.message
    # A parse-only materialization succeeded: no paid extraction behind anybody's back.
    parsed_only = judge(_view("pending"), RunInfo("p", "SUCCESS", 0, 10))
    assert parsed_only is not None and parsed_only.action == Action.FAIL
    # Rounds are counted since the last `batch retry`: a user's retries never use up the limit.
    assert judge(_view(round_=2), RunInfo("e", "FAILURE", 0, 10)).action == Action.FAIL  # type: ignore[union-attr]
    assert judge(_view(round_=6, retry_round=5), RunInfo("f", "FAILURE", 0, 10)).action == Action.REQUEUE  # type: ignore[union-attr]


def test_an_interrupted_run_hands_the_document_back_without_starting_its_failure_clock(ledger: Ledger) -> None:
    [doc] = add_documents(ledger, 1)
    create_batch(ledger, idempotency_key="k", project="p", user="u", document_ids=[doc])
    assert states.claim(ledger, 1, run_id="r", worker="w")
    assert states.release(ledger, 1, run_id="r", message="interrupted", failing=False)
    assert states.get_item(ledger, 1)["failing_since"] is None  # type: ignore[index]
    assert states.claim(ledger, 1, run_id="r", worker="w")
    assert states.release(ledger, 1, run_id="r", message="HTTP 429")
    assert states.get_item(ledger, 1)["failing_since"] is not None  # type: ignore[index]


def test_only_one_caller_wins_the_probe_when_the_cooldown_ends(ledger: Ledger) -> None:
    policy = BreakerPolicy(failures=1, base_cooldown_seconds=60, max_cooldown_seconds=60)
    record_failure(ledger, "openai/x", "HTTP 503", policy=policy)
    assert may_call(ledger, "openai/x", policy) is not None  # open: wait
    with ledger.engine.begin() as conn:
        conn.execute(provider_breakers.update().values(open_until=utcnow() - timedelta(seconds=1)))
    verdicts = [may_call(ledger, "openai/x", policy) for _ in range(5)]
    assert [v is None for v in verdicts] == [True, False, False, False, False]
    assert may_call(ledger, "openai/closed", policy) is None
