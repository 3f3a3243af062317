"""One decompression for client and filter server: zlib, LZ4 (frame) and zstd, bounded, with clear errors."""

from __future__ import annotations

import zlib

import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from sievemq.protocol.compression import CompressionError, compress_zlib, decompress, is_compressed
from sievemq.protocol.sysflag import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_ZLIB_TYPE,
    COMPRESSION_ZSTD_TYPE,
    MULTI_TAGS_FLAG,
)

LZ4 = COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE
ZSTD = COMPRESSED_FLAG | COMPRESSION_ZSTD_TYPE
ZLIB5 = COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
CASES = [
    (COMPRESSED_FLAG, zlib.compress),  # 4.x clients: no type bits, always zlib
    (ZLIB5, zlib.compress),
    (LZ4, lz4.frame.compress),
    (ZSTD, zstandard.ZstdCompressor().compress),
    (ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress),  # streaming producers omit the size
]


@pytest.mark.parametrize(("flag", "compress"), CASES)
@given(body=st.binary(max_size=5000))
def test_round_trip(flag: int, compress: object, body: bytes) -> None:
    assert callable(compress)
    data = compress(body)
    assert decompress(data, flag | MULTI_TAGS_FLAG) == body


def test_uncompressed_bodies_pass_through() -> None:
    assert decompress(b"\x78\x9cplain", MULTI_TAGS_FLAG) == b"\x78\x9cplain"
    assert decompress(b"", COMPRESSED_FLAG) == b""
    assert not is_compressed(0) and is_compressed(LZ4)
    assert decompress(compress_zlib(b"abc" * 100), COMPRESSED_FLAG) == b"abc" * 100


@pytest.mark.parametrize(("flag", "compress"), CASES)
def test_a_body_that_inflates_past_the_limit_is_refused(flag: int, compress: object) -> None:
    assert callable(compress)
    body = bytes(2 * 1024 * 1024)
    data = compress(body)
    assert decompress(data, flag, max_size=len(body)) == body
    with pytest.raises(CompressionError, match="more than"):
        decompress(data, flag, max_size=len(body) - 1)


def test_a_small_zstd_bomb_stops_near_the_limit() -> None:
    bomb = zstandard.ZstdCompressor(level=19).compress(bytes(64 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    with pytest.raises(CompressionError, match="more than 1048576"):
        decompress(bomb, ZSTD, max_size=1 << 20)


@pytest.mark.parametrize(("flag", "compress"), CASES)
def test_truncated_and_garbage_bodies_are_errors(flag: int, compress: object) -> None:
    assert callable(compress)
    data = compress(b"hello world " * 500)
    with pytest.raises(CompressionError, match="truncated"):
        decompress(data[: len(data) // 2], flag)
    with pytest.raises(CompressionError):
        decompress(b"certainly not compressed", flag)


def test_unknown_compression_type() -> None:
    with pytest.raises(CompressionError, match="unknown compression type 0x400"):
        decompress(b"xx", COMPRESSED_FLAG | 0x400)
