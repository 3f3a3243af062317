"""Retry or dead letter: the one place that decides where a failed message goes next. Pure, no I/O.

A consumer hands a failed message back (CONSUMER_SEND_MSG_BACK), or sends it to ``%RETRY%<group>`` itself (the
clients' fallback). Either way the message has been consumed ``reconsume_times`` times; once that reaches the
group's limit it goes to ``%DLQ%<group>`` (queue 0, no delay), otherwise it comes back through the retry topic
after a delay level that grows with each attempt (``docs/protocol/message-format.md``, delay, retry, DLQ).

The limit is the client's ``maxReconsumeTimes`` when the client is recent enough to send one
(``VERSION_SEND_BACK_MAX_RECONSUME``), else the group's ``retryMaxTimes``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.protocol.names import VERSION_SEND_BACK_MAX_RECONSUME

__all__ = ["FIRST_RETRY_DELAY_LEVEL", "RetryDecision", "client_retry_limit", "decide"]

FIRST_RETRY_DELAY_LEVEL = 3
"""The delay level of a first retry (10 s with the default levels); each further attempt waits one level more."""


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Where a failed message goes: the dead-letter topic, or the retry topic after ``delay_level``."""

    dead_letter: bool
    delay_level: int = 0
    """For a retry: the delay level to wait (0 for a dead letter)."""


def client_retry_limit(requested: int | None, client_version: int) -> int | None:
    """The client's own retry limit when it sends one and is recent enough to mean it; None: use the group's."""
    return requested if requested is not None and client_version >= VERSION_SEND_BACK_MAX_RECONSUME else None


def decide(reconsume_times: int, max_times: int, requested_delay: int = 0) -> RetryDecision:
    """Dead letter once ``reconsume_times`` reached ``max_times`` (or the client asks for it with a negative
    delay level); otherwise retry after ``requested_delay`` when positive, else after the attempt's own level."""
    if reconsume_times >= max_times or requested_delay < 0:
        return RetryDecision(True)
    return RetryDecision(False, requested_delay if requested_delay > 0 else FIRST_RETRY_DELAY_LEVEL + reconsume_times)
