"""Message counters of a broker (puts and gets, total and per topic)."""

from __future__ import annotations

from collections import Counter


class BrokerStats:
    """Counts messages stored and delivered."""

    def __init__(self) -> None:
        self.put_total = 0
        self.get_total = 0
        self.put_by_topic: Counter[str] = Counter()
        self.get_by_topic: Counter[str] = Counter()

    def put(self, topic: str, n: int) -> None:
        """``n`` messages stored to ``topic``."""
        self.put_total += n
        self.put_by_topic[topic] += n

    def get(self, topic: str, n: int) -> None:
        """``n`` messages delivered from ``topic``."""
        self.get_total += n
        self.get_by_topic[topic] += n
