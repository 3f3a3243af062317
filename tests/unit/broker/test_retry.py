"""Retry or dead letter: one decision for send-backs and for clients' own sends to a retry topic (pure)."""

from __future__ import annotations

from sievemq.broker.retry import FIRST_RETRY_DELAY_LEVEL, RetryDecision, client_retry_limit, decide
from sievemq.protocol.names import VERSION_SEND_BACK_MAX_RECONSUME


def test_retries_wait_one_level_more_each_time_until_the_limit() -> None:
    assert [decide(n, 16) for n in range(3)] == [RetryDecision(False, FIRST_RETRY_DELAY_LEVEL + n) for n in range(3)]
    assert decide(15, 16) == RetryDecision(False, 18)
    assert decide(16, 16) == RetryDecision(True) and decide(40, 16).dead_letter


def test_a_requested_delay_wins_and_a_negative_one_dead_letters() -> None:
    assert decide(0, 16, requested_delay=5) == RetryDecision(False, 5)
    assert decide(0, 16, requested_delay=-1) == RetryDecision(True)
    assert decide(0, 0).dead_letter, "a limit of 0 means no retry at all"


def test_only_recent_clients_set_their_own_limit() -> None:
    v = VERSION_SEND_BACK_MAX_RECONSUME
    assert client_retry_limit(3, v) == 3 and client_retry_limit(3, v + 300) == 3
    assert client_retry_limit(3, v - 1) is None, "an old client's field is not trusted (the C++ core sends 63)"
    assert client_retry_limit(None, v) is None
