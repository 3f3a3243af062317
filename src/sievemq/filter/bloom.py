"""RocketMQ's Bloom filter for SQL92 pre-filtering (docs/protocol/bloom.md §1-§4), bit for bit.

Each (consumer group, topic) SQL filter owns ``k`` bit positions in an ``m``-bit bitmap, derived
from the string ``group + "#" + topic``. At dispatch the broker evaluates every registered
expression on a message and sets the positions of the groups that match; at pull time a group
whose positions are not all set can skip the message without reading the commit log.

* parameters from ``f`` (max error rate, percent, 1..99) and ``n`` (expected consumers):
  ``k = ceil(ln(f/100) / ln 0.5)``, ``m = ceil(n * log2(100/f) * log2(e))`` rounded up to a
  multiple of 8 — computed with the same double arithmetic as Java;
* positions: MurmurHash3 x64-128 (seed 0) of the UTF-8 bytes, first 64 bits little-endian and
  signed (Guava ``asLong()``), then Kirsch-Mitzenmacher double hashing on 32-bit ints;
* bit ``p`` lives in byte ``p // 8`` under mask ``1 << (p % 8)`` (least-significant bit first).

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import mmh3

__all__ = [
    "DEFAULT_EXPECTED_CONSUMERS",
    "DEFAULT_MAX_ERROR_RATE",
    "BloomFilter",
    "BloomFilterData",
    "bit_positions",
    "bloom_parameters",
    "hash64",
    "is_hit",
    "set_bits",
]

DEFAULT_MAX_ERROR_RATE = 20
"""BrokerConfig ``maxErrorRateOfBloomFilter`` (percent)."""
DEFAULT_EXPECTED_CONSUMERS = 32
"""BrokerConfig ``expectConsumerNumUseFilter``."""


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def _log(base: float, x: float) -> float:
    # Java BloomFilter.logMN(m, n) = Math.log(n) / Math.log(m)
    return math.log(x) / math.log(base)


def bloom_parameters(max_error_rate: int, expected: int) -> tuple[int, int]:
    """``(k, m)`` for an error rate ``f`` percent and ``n`` expected members, like Java's BloomFilter.

    Raises ``ValueError`` unless ``1 <= f < 100`` and ``n >= 1``.
    """
    if not 1 <= max_error_rate < 100:
        raise ValueError(f"the Bloom error rate must be 1..99 percent, not {max_error_rate}")
    if expected < 1:
        raise ValueError(f"the expected number of Bloom members must be at least 1, not {expected}")
    error_rate = max_error_rate / 100.0
    k = math.ceil(_log(0.5, error_rate))
    if k < 1:  # pragma: no cover - impossible for f < 100
        raise ValueError("the Bloom error rate gives less than one hash function")
    m = math.ceil(expected * _log(2, 1 / error_rate) * _log(2, math.e))
    m = 8 * math.ceil(m / 8.0)
    return k, m


def hash64(data: str) -> int:
    """Guava ``murmur3_128().hashString(data, UTF_8).asLong()``: signed 64-bit.

    Unpaired surrogates are encoded as ``?`` like Java's UTF-8 encoder does.
    """
    return int(mmh3.hash64(data.encode("utf-8", "replace"), 0, True, True)[0])


def bit_positions(data: str, k: int, m: int) -> list[int]:
    """The ``k`` bit positions (0..m-1, repeats possible) of ``data`` in an ``m``-bit bitmap."""
    h64 = hash64(data)
    h1 = _int32(h64)
    h2 = _int32(h64 >> 32)
    positions = []
    for i in range(1, k + 1):
        combined = _int32(h1 + i * h2)
        if combined < 0:
            combined = ~combined
        positions.append(combined % m)
    return positions


def set_bits(bitmap: bytearray, positions: Iterable[int]) -> None:
    """Set the given bit positions in ``bitmap`` (LSB first within each byte)."""
    for p in positions:
        bitmap[p >> 3] |= 1 << (p & 7)


def is_hit(bitmap: bytes | bytearray | memoryview, positions: Iterable[int]) -> bool:
    """True when every given bit position is set in ``bitmap``."""
    return all(bitmap[p >> 3] & (1 << (p & 7)) for p in positions)


@dataclass(frozen=True, slots=True)
class BloomFilterData:
    """A filter entry's Bloom data as stored and persisted (``bitPos``, ``bitNum`` in JSON)."""

    bit_pos: tuple[int, ...]
    bit_num: int

    def to_json(self) -> dict[str, object]:
        """The RocketMQ JSON shape: ``{"bitPos": [...], "bitNum": m}``."""
        return {"bitPos": list(self.bit_pos), "bitNum": self.bit_num}

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> BloomFilterData:
        """Read the RocketMQ JSON shape (raises ``ValueError`` if malformed)."""
        bit_pos = obj.get("bitPos")
        bit_num = obj.get("bitNum")
        if (
            not isinstance(bit_num, int)
            or not isinstance(bit_pos, list)
            or not all(isinstance(p, int) for p in bit_pos)
        ):
            raise ValueError(f"malformed bloomFilterData: {obj!r}")
        return cls(tuple(bit_pos), bit_num)


@dataclass(frozen=True, slots=True)
class BloomFilter:
    """The broker's Bloom parameters; build with :meth:`create` (or the defaults)."""

    max_error_rate: int
    expected: int
    k: int
    m: int

    @classmethod
    def create(
        cls, max_error_rate: int = DEFAULT_MAX_ERROR_RATE, expected: int = DEFAULT_EXPECTED_CONSUMERS
    ) -> BloomFilter:
        """Parameters from BrokerConfig ``maxErrorRateOfBloomFilter`` and ``expectConsumerNumUseFilter``."""
        k, m = bloom_parameters(max_error_rate, expected)
        return cls(max_error_rate, expected, k, m)

    @property
    def byte_length(self) -> int:
        """Bitmap size in bytes (``m / 8``)."""
        return self.m // 8

    def empty_bitmap(self) -> bytearray:
        """An all-zero bitmap of ``m`` bits."""
        return bytearray(self.byte_length)

    def bit_positions(self, data: str) -> list[int]:
        """The positions of ``data`` (for a filter entry: ``group + "#" + topic``)."""
        return bit_positions(data, self.k, self.m)

    def generate(self, data: str) -> BloomFilterData:
        """Bloom data for a filter entry (``BloomFilter.generate``)."""
        return BloomFilterData(tuple(self.bit_positions(data)), self.m)

    def is_valid(self, data: BloomFilterData | None) -> bool:
        """True when ``data`` belongs to these parameters: ``bit_num == m`` and exactly ``k`` positions."""
        return data is not None and data.bit_num == self.m and len(data.bit_pos) == self.k

    def set_bits(self, bitmap: bytearray, positions: Sequence[int] | BloomFilterData) -> None:
        """Set positions in a bitmap of this filter's size (raises ``ValueError`` on a size mismatch)."""
        self._check(bitmap)
        set_bits(bitmap, positions.bit_pos if isinstance(positions, BloomFilterData) else positions)

    def is_hit(self, bitmap: bytes | bytearray | memoryview, positions: Sequence[int] | BloomFilterData) -> bool:
        """True when all positions are set (raises ``ValueError`` on a size mismatch or invalid data)."""
        self._check(bitmap)
        if isinstance(positions, BloomFilterData):
            if not self.is_valid(positions):
                raise ValueError(f"Bloom filter data {positions} does not belong to {self}")
            positions = positions.bit_pos
        return is_hit(bitmap, positions)

    def _check(self, bitmap: bytes | bytearray | memoryview) -> None:
        if len(bitmap) * 8 != self.m:
            raise ValueError(f"bitmap has {len(bitmap) * 8} bits, this Bloom filter uses {self.m}")
