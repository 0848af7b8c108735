"""Failed sign-ins counted per client (web/signin_throttle.py)."""

from __future__ import annotations

from extraction_pipeline.web.signin_throttle import FailedSignins


def test_a_client_waits_after_the_limit_until_its_oldest_failure_is_a_window_old() -> None:
    count = FailedSignins(limit=3, window_seconds=60)
    for second in (0, 10, 20):
        assert count.wait_seconds("10.0.0.1", now=second) == 0
        count.failed("10.0.0.1", now=second)
    assert count.wait_seconds("10.0.0.1", now=30) == 30  # until the first failure is 60 s old
    assert count.wait_seconds("10.0.0.2", now=30) == 0  # another client is not held back
    assert count.wait_seconds("10.0.0.1", now=60) == 0  # the first has aged out: one more try
    assert count.failed("10.0.0.1", now=60) == 3
    assert count.wait_seconds("10.0.0.1", now=61) == 9  # held again, until the second is a window old


def test_clients_are_forgotten_once_idle_and_never_more_than_the_cap() -> None:
    from extraction_pipeline.web import signin_throttle

    count = FailedSignins(limit=3, window_seconds=60)
    for n in range(signin_throttle.MAX_CLIENTS):
        count.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}", now=0)
    assert count.wait_seconds("203.0.113.9", now=1) == 0 and len(count._failures) == signin_throttle.MAX_CLIENTS
    count.failed("203.0.113.9", now=61)  # at the cap: the idle ones (a window old) are forgotten
    assert len(count._failures) == 1
    for n in range(signin_throttle.MAX_CLIENTS + 5):  # all recent: the oldest go first
        count.failed(f"198.{n // 65536}.{n // 256 % 256}.{n % 256}", now=62)
    assert len(count._failures) <= signin_throttle.MAX_CLIENTS
