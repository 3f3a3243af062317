"""The broker's pull counters from its ``/metrics`` (Prometheus text): how many pulls a phase took."""

from __future__ import annotations

import asyncio
import urllib.request
from dataclasses import dataclass

PULL = "sievemq_pull_latency_seconds"


@dataclass
class Pulls:
    """Pull answers so far and the seconds the broker spent on them (held time excluded)."""

    count: float = 0.0
    seconds: float = 0.0

    def __sub__(self, other: Pulls) -> Pulls:
        return Pulls(self.count - other.count, self.seconds - other.seconds)


def _read(url: str) -> Pulls:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = Pulls()
    for line in text.splitlines():
        if line.startswith(f"{PULL}_count"):
            out.count += float(line.split()[-1])
        elif line.startswith(f"{PULL}_sum"):
            out.seconds += float(line.split()[-1])
    return out


async def pulls(url: str) -> Pulls:
    """The broker's pull counters now (``url``: its HTTP base URL)."""
    return await asyncio.to_thread(_read, url)
