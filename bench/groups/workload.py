"""What bench_groups sends and what each consumer group subscribes: message ``k`` carries the tag ``T{k % m}``
and the properties ``region = r{k % m}``, ``amount`` and ``k``; group ``i`` subscribes the tag ``T{i % m}`` or the
SQL92 selector ``region = 'r{i % m}' AND amount > 10``, so it gets about one message in ``m``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from sievemq import Message, Selector

TOPIC = "BenchGroups"
QUEUES = 4
FilterMix = Literal["mixed", "tag", "sql"]
MIN_AMOUNT = 10
"""SQL92 groups want ``amount > MIN_AMOUNT``: ``amount`` is ``(k // m) % 100``, so 89% of their region's messages."""


def amount_of(k: int, m: int) -> int:
    """The ``amount`` property of message ``k`` (``m``: one message in ``m`` per tag / region)."""
    return (k // m) % 100


def message(k: int, m: int, body: bytes, topic: str = TOPIC) -> Message:
    """Message ``k``: ``body``, tag ``T{k % m}``, properties ``region``, ``amount``, ``k``."""
    props = {"region": f"r{k % m}", "amount": str(amount_of(k, m)), "k": str(k)}
    return Message(topic, body, tags=f"T{k % m}", properties=props)


def make_body(size: int) -> bytes:
    """``size`` bytes of hex text."""
    return (os.urandom(16).hex().encode() * (size // 32 + 1))[:size]


@dataclass(frozen=True)
class GroupSpec:
    """Consumer group ``index`` of a run: its name and filter."""

    index: int
    m: int
    kind: Literal["tag", "sql"]
    prefix: str = "bench-g"

    @property
    def name(self) -> str:
        """The consumer group's name."""
        return f"{self.prefix}-{self.index}"

    @property
    def slot(self) -> int:
        """The tag / region number it wants."""
        return self.index % self.m

    def selector(self) -> Selector:
        """Its subscription."""
        if self.kind == "tag":
            return Selector.tag(f"T{self.slot}")
        return Selector.sql(f"region = 'r{self.slot}' AND amount > {MIN_AMOUNT}")

    def matches(self, k: int) -> bool:
        """Whether message ``k`` is for this group."""
        if k % self.m != self.slot:
            return False
        return self.kind == "tag" or amount_of(k, self.m) > MIN_AMOUNT

    def expected(self, end: int) -> int:
        """How many of messages ``0 .. end-1`` it gets."""
        return sum(1 for k in range(self.slot, end, self.m) if self.matches(k))


def kind_of(index: int, mix: FilterMix) -> Literal["tag", "sql"]:
    """``mixed``: even groups a tag, odd ones SQL92 (so one group is a tag group)."""
    if mix == "mixed":
        return "tag" if index % 2 == 0 else "sql"
    return mix


def groups(count: int, m: int, mix: FilterMix, prefix: str = "bench-g") -> list[GroupSpec]:
    """The ``count`` groups of a row."""
    return [GroupSpec(i, m, kind_of(i, mix), prefix) for i in range(count)]
