"""RocketMQ's Bloom filter layout (docs/protocol/bloom.md §1-§4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.filter.bloom import (
    BloomFilter,
    BloomFilterData,
    bit_positions,
    bloom_parameters,
    hash64,
    is_hit,
    set_bits,
)


@pytest.mark.parametrize(
    ("f", "n", "k", "m"),
    [(20, 32, 3, 112), (20, 64, 3, 216), (10, 20, 4, 96), (1, 300, 7, 2880), (50, 10, 1, 16)],
)
def test_parameters_table(f: int, n: int, k: int, m: int) -> None:
    assert bloom_parameters(f, n) == (k, m)
    bf = BloomFilter.create(f, n)
    assert (bf.k, bf.m, bf.byte_length) == (k, m, m // 8)


def test_defaults() -> None:
    bf = BloomFilter.create()
    assert (bf.max_error_rate, bf.expected, bf.k, bf.m) == (20, 32, 3, 112)


@pytest.mark.parametrize(("f", "n"), [(0, 32), (100, 32), (-5, 32), (20, 0), (20, -1)])
def test_parameter_validation(f: int, n: int) -> None:
    with pytest.raises(ValueError):
        bloom_parameters(f, n)


@given(st.integers(min_value=1, max_value=99), st.integers(min_value=1, max_value=5000))
def test_m_is_a_positive_multiple_of_8(f: int, n: int) -> None:
    k, m = bloom_parameters(f, n)
    assert k >= 1
    assert m > 0
    assert m % 8 == 0


@pytest.mark.parametrize(
    ("data", "positions"),
    [("please_rename_unique_group_name_4#TopicTest", [63, 14, 51]), ("GID_order#orders", [11, 52, 84])],
)
def test_bit_position_vectors(data: str, positions: list[int]) -> None:
    assert bit_positions(data, 3, 112) == positions
    assert BloomFilter.create().bit_positions(data) == positions


def test_hash64_vector() -> None:
    assert hash64("GID_order#orders") == -7193969957945073660


def test_bitmap_is_lsb_first() -> None:
    bitmap = bytearray(2)
    set_bits(bitmap, [0, 9, 15])
    assert bitmap == bytes([0b0000_0001, 0b1000_0010])
    assert is_hit(bitmap, [0, 9])
    assert is_hit(bytes(bitmap), [15])
    assert not is_hit(bitmap, [0, 1])
    assert is_hit(bitmap, [])


def test_group_hits_only_when_all_positions_set() -> None:
    bf = BloomFilter.create()
    bitmap = bf.empty_bitmap()
    assert len(bitmap) == 14
    order = bf.generate("GID_order#orders")
    test = bf.generate("please_rename_unique_group_name_4#TopicTest")
    bf.set_bits(bitmap, order)
    assert bf.is_hit(bitmap, order)
    assert not bf.is_hit(bitmap, test)
    assert bitmap[11 // 8] & (1 << 3)
    bf.set_bits(bitmap, [63, 14])
    assert not bf.is_hit(bitmap, test)
    bf.set_bits(bitmap, [51])
    assert bf.is_hit(bitmap, test)


def test_bloom_filter_data_validity() -> None:
    bf = BloomFilter.create()
    good = bf.generate("GID_order#orders")
    assert good == BloomFilterData((11, 52, 84), 112)
    assert bf.is_valid(good)
    assert not bf.is_valid(None)
    assert not bf.is_valid(BloomFilterData((11, 52, 84), 216))  # bit_num must equal m
    assert not bf.is_valid(BloomFilterData((11, 52), 112))  # exactly k positions
    assert not bf.is_valid(BloomFilterData((11, 52, 84, 1), 112))
    assert not BloomFilter.create(20, 64).is_valid(good)
    with pytest.raises(ValueError):
        bf.is_hit(bf.empty_bitmap(), BloomFilterData((1, 2), 112))


def test_bitmap_size_is_checked() -> None:
    bf = BloomFilter.create()
    with pytest.raises(ValueError):
        bf.set_bits(bytearray(13), [1])
    with pytest.raises(ValueError):
        bf.is_hit(bytes(15), [1])


def test_json_shape() -> None:
    data = BloomFilterData((11, 52, 84), 112)
    assert data.to_json() == {"bitPos": [11, 52, 84], "bitNum": 112}
    assert BloomFilterData.from_json({"bitPos": [11, 52, 84], "bitNum": 112}) == data
    for bad in ({"bitPos": None, "bitNum": 112}, {"bitPos": [1], "bitNum": "112"}, {}):
        with pytest.raises(ValueError):
            BloomFilterData.from_json(bad)


@given(st.text(), st.sampled_from([(20, 32), (1, 300), (50, 10), (10, 20)]))
def test_positions_are_in_range_and_deterministic(data: str, params: tuple[int, int]) -> None:
    k, m = bloom_parameters(*params)
    positions = bit_positions(data, k, m)
    assert len(positions) == k
    assert all(0 <= p < m for p in positions)
    assert positions == bit_positions(data, k, m)
    bitmap = bytearray(m // 8)
    set_bits(bitmap, positions)
    assert is_hit(bitmap, positions)


def test_unpaired_surrogates_hash_like_java_question_marks() -> None:
    # Java's UTF-8 encoder writes '?' for an unpaired surrogate.
    assert hash64("a\ud800b") == hash64("a?b")
