"""retry_call: exponential backoff with jitter, shared by the live price sources."""

from __future__ import annotations

import pytest

from router.prices.retry import backoff_delay_s, retry_call


class Throttled(Exception):
    pass


class Denied(Exception):
    pass


def flaky(failures: list[BaseException], value: str) -> tuple[list[int], object]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return value

    return calls, call


def test_retryable_failures_are_retried_until_the_call_succeeds() -> None:
    calls, call = flaky([Throttled(), Throttled()], "prices")
    slept: list[float] = []

    result = retry_call(
        call,  # type: ignore[arg-type]
        is_retryable=lambda exc: isinstance(exc, Throttled),
        max_attempts=5,
        base_delay_s=0.5,
        max_delay_s=8.0,
        sleep=slept.append,
    )

    assert result == "prices"
    assert len(calls) == 3
    assert len(slept) == 2
    assert 0.0 <= slept[0] <= 0.5 and 0.0 <= slept[1] <= 1.0


def test_non_retryable_error_is_raised_at_once_without_sleeping() -> None:
    calls, call = flaky([Denied("no ec2:DescribeSpotPriceHistory")], "prices")
    slept: list[float] = []

    with pytest.raises(Denied, match="DescribeSpotPriceHistory"):
        retry_call(
            call,  # type: ignore[arg-type]
            is_retryable=lambda exc: isinstance(exc, Throttled),
            max_attempts=5,
            base_delay_s=0.5,
            max_delay_s=8.0,
            sleep=slept.append,
        )
    assert len(calls) == 1
    assert slept == []


def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    calls, call = flaky([Throttled("1"), Throttled("2"), Throttled("3"), Throttled("4")], "x")
    slept: list[float] = []

    with pytest.raises(Throttled, match="3"):
        retry_call(
            call,  # type: ignore[arg-type]
            is_retryable=lambda exc: True,
            max_attempts=3,
            base_delay_s=1.0,
            max_delay_s=2.0,
            sleep=slept.append,
        )
    assert len(calls) == 3
    assert len(slept) == 2


def test_server_requested_wait_replaces_backoff_but_is_capped() -> None:
    _, call = flaky([Throttled(), Throttled()], "ok")
    slept: list[float] = []
    requested = iter([3.0, 120.0])

    retry_call(
        call,  # type: ignore[arg-type]
        is_retryable=lambda exc: True,
        max_attempts=3,
        base_delay_s=0.1,
        max_delay_s=30.0,
        sleep=slept.append,
        retry_after=lambda exc: next(requested),
    )
    assert slept == [3.0, 30.0]


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 8, 20])
def test_backoff_ceiling_doubles_per_attempt_up_to_the_cap(attempt: int) -> None:
    ceiling = min(10.0, 0.25 * 2 ** (attempt - 1))
    delays = [backoff_delay_s(attempt, base_delay_s=0.25, max_delay_s=10.0) for _ in range(200)]
    assert all(0.0 <= d <= ceiling for d in delays)
    # Jitter: concurrent workers do not all wait the same time.
    assert len(set(delays)) > 1


def test_zero_attempts_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        retry_call(
            lambda: 1,
            is_retryable=lambda exc: True,
            max_attempts=0,
            base_delay_s=0.1,
            max_delay_s=1.0,
        )
