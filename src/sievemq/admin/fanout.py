"""Asking every broker set the same thing at once, keeping each one's answer or failure apart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar

from sievemq.admin.api import BrokerInfo, describe_failure
from sievemq.errors import RemotingError, SieveError

T = TypeVar("T")

__all__ = ["CONCURRENCY", "all_refused", "fan_out", "texts"]

CONCURRENCY = 16
"""Requests in flight at once from one command (a cluster of many brokers is asked in waves)."""

Failure = SieveError | OSError | ValueError


async def fan_out(
    brokers: Iterable[BrokerInfo], ask: Callable[[BrokerInfo], Awaitable[T]]
) -> tuple[dict[str, T], dict[str, Failure]]:
    """``ask(broker)`` for every broker set at once: (answers by broker name, failures by broker name).

    A refusal, a connection failure, a timeout or an unreadable answer of one broker is its failure, not the
    command's; anything else (a bug) is raised."""
    gate = asyncio.Semaphore(CONCURRENCY)
    answers: dict[str, T] = {}
    failures: dict[str, Failure] = {}

    async def one(b: BrokerInfo) -> None:
        async with gate:
            try:
                answers[b.name] = await ask(b)
            except (SieveError, OSError, ValueError) as e:
                failures[b.name] = e

    await asyncio.gather(*(one(b) for b in brokers))
    return dict(sorted(answers.items())), dict(sorted(failures.items()))


def texts(failures: Mapping[str, BaseException]) -> dict[str, str]:
    """Failures as text (a refusal with its code, a connection failure in a few words)."""
    return {n: str(e) if isinstance(e, RemotingError) else describe_failure(e) for n, e in failures.items()}


def all_refused(failures: Mapping[str, BaseException], reason: str, answered: int) -> bool:
    """True when nobody answered and every failure is a refusal with ``reason``."""
    return (
        answered == 0
        and bool(failures)
        and all(isinstance(e, RemotingError) and e.reason == reason for e in failures.values())
    )
