"""The messages every system sends, and constants shared by the peers."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bench.system.measure import Result

QUEUES = 4
"""Queues (sievemq), partitions (Tansu) of every topic; consumers of a Redis group."""
PULL_BATCH = 32
"""Messages per pull (sievemq), per XREADGROUP (Redis)."""
REGIONS = ("eu", "us", "apac", "latam")
KINDS = ("a", "b", "c")
TAG_A, TAG_B = "TagA", "TagB"
REPO = Path(__file__).resolve().parents[2]
"""This checkout's root (``bench/system`` is two levels below)."""
PHASE_TIMEOUT = 600.0
"""Seconds a throughput phase may take before it is abandoned."""


def tag_of(i: int) -> str:
    """The tag of message ``i``: ``TagA`` on every 10th message, ``TagB`` otherwise."""
    return TAG_A if i % 10 == 0 else TAG_B


def props_of(i: int) -> dict[str, str]:
    """The three user properties of message ``i`` (Kafka headers, Redis stream fields)."""
    return {"region": REGIONS[i % 4], "amount": str(i % 1000), "kind": KINDS[i % 3]}


def key_of(i: int) -> str:
    """The key of message ``i`` (sievemq ``KEYS``, indexed by the broker; Kafka's record key; a Redis field)."""
    return f"order-{i}"


def n_tag_a(n: int) -> int:
    """How many of messages ``0 .. n-1`` carry ``TagA``."""
    return (n + 9) // 10


def make_body(size: int) -> bytes:
    """``size`` bytes of hex text (random per run, the same for every message and system)."""
    return (os.urandom(16).hex().encode() * (size // 32 + 1))[:size]


def child_env(extra_path: Path | None = None) -> dict[str, str]:
    """This process's environment with this checkout (and ``extra_path``) first on ``PYTHONPATH``."""
    paths = [str(REPO / "src"), str(REPO)]
    if extra_path is not None:
        paths.insert(0, str(extra_path))
    old = os.environ.get("PYTHONPATH")
    if old:
        paths.append(old)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"}


def log(text: str) -> None:
    """A progress line on stderr (the report goes to stdout)."""
    print(f"  ... {text}", file=sys.stderr, flush=True)


class Peer(Protocol):
    """What the runner asks of every system (sievemq, its baseline, Redis, Tansu)."""

    @property
    def name(self) -> str:
        """The system's column: ``sievemq``, ``baseline``, ``redis`` or ``tansu``."""

    @property
    def pid(self) -> int:
        """The server process whose CPU counts."""

    @property
    def wire(self) -> str | None:
        """The ``Wire`` counter of its client (None: its consume phases set ``wire_bytes`` themselves)."""

    async def setup(self) -> None:
        """Topics, streams: whatever the phases need."""

    async def close(self) -> None:
        """Close clients (and stop the server where the peer owns it)."""

    async def produce_single(self, n: int, inflight: int, r: Result) -> None:
        """Messages ``0..n-1``, one per request, ``inflight`` requests in flight."""

    async def produce_batch(self, n: int, r: Result) -> None:
        """Messages ``0..n-1`` in batches (the system's own way)."""

    async def consume(self, expected: int, tag: str | None, r: Result) -> None:
        """The batch topic from its start for a new group, until ``expected`` delivered (``tag``: only that)."""

    async def latency(self, rate: int, seconds: float, r: Result) -> None:
        """Paced awaited sends to a consumer in another process; ``r.latencies_ms``."""

    async def latency_concurrent(self, rate: int, seconds: float, r: Result) -> None:
        """Paced sends, each started on schedule without waiting for the earlier ones (concurrent senders), to a
        consumer in another process; ``r.latencies_ms`` and the sends in flight."""
