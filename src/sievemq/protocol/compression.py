"""Message-body compression as the ``sysFlag`` bits describe it (``docs/protocol/message-format.md``).

A compressed body has ``COMPRESSED_FLAG`` (0x1); bits 0x700 name the algorithm: 0 (4.x clients, which only ever
used zlib) or 0x300 zlib, 0x100 LZ4 (frame format), 0x200 zstd. The same ``decompress`` serves the client and the
filter server's workers, so a filter function sees the same body a consumer does. Pure: no I/O.

A body is inflated to at most ``max_size`` bytes: a small hostile message must not become gigabytes in a
consumer or a filter worker.
"""

from __future__ import annotations

import zlib

import lz4.frame  # type: ignore[import-untyped]
import zstandard

from sievemq.protocol.sysflag import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB_TYPE,
    COMPRESSION_ZSTD_TYPE,
)

__all__ = ["DEFAULT_MAX_INFLATED", "CompressionError", "compress_zlib", "decompress", "is_compressed"]

DEFAULT_MAX_INFLATED = 256 * 1024 * 1024
"""Largest body ``decompress`` produces by default (bytes)."""


class CompressionError(ValueError):
    """A body cannot be inflated: unknown algorithm, corrupt data, or larger than allowed."""


def is_compressed(sys_flag: int) -> bool:
    """True when ``sys_flag`` says the body is compressed."""
    return bool(sys_flag & COMPRESSED_FLAG)


def compress_zlib(body: bytes, level: int = 5) -> bytes:
    """zlib-compress a body (the form every client understands; set ``COMPRESSED_FLAG`` with it)."""
    return zlib.compress(body, level)


def decompress(body: bytes, sys_flag: int, max_size: int = DEFAULT_MAX_INFLATED) -> bytes:
    """The inflated body of a message stored with ``sys_flag`` (the body itself when it is not compressed)."""
    if not sys_flag & COMPRESSED_FLAG or not body:
        return body
    kind = sys_flag & COMPRESSION_TYPE_MASK
    try:
        if kind in (0, COMPRESSION_ZLIB_TYPE):
            d = zlib.decompressobj()
            out = d.decompress(body, max_size)
            if d.unconsumed_tail:
                raise CompressionError(f"zlib body inflates to more than {max_size} bytes")
            if not d.eof:
                raise CompressionError("zlib body is truncated")
            return out
        if kind == COMPRESSION_LZ4_TYPE:
            return _lz4(body, max_size)
        if kind == COMPRESSION_ZSTD_TYPE:
            return _zstd(body, max_size)
    except CompressionError:
        raise
    except (zlib.error, RuntimeError, zstandard.ZstdError) as e:
        raise CompressionError(f"corrupt compressed body (sysFlag 0x{sys_flag:x}): {e}") from None
    raise CompressionError(f"unknown compression type 0x{kind:x} in sysFlag 0x{sys_flag:x}")


_LZ4_STEP = 1 << 20
"""Output bytes asked of LZ4 at a time (it allocates what it is asked for up front)."""


def _lz4(body: bytes, max_size: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    parts = [d.decompress(body, max_length=min(_LZ4_STEP, max_size + 1))]
    size = len(parts[0])
    while not d.eof and not d.needs_input:
        if size > max_size:
            break
        part = d.decompress(b"", max_length=min(_LZ4_STEP, max_size + 1 - size))
        size += len(part)
        parts.append(part)
    if size > max_size:
        raise CompressionError(f"LZ4 body inflates to more than {max_size} bytes")
    if not d.eof:
        raise CompressionError("LZ4 body is truncated")
    return b"".join(parts)


_ZSTD_STEP = 1024
"""Compressed bytes fed to zstd at a time: a zstd block of a few bytes can stand for 128 KiB, so the output of
one step stays within a few MiB of ``max_size`` before the size check stops it."""


def _zstd(body: bytes, max_size: int) -> bytes:
    d = zstandard.ZstdDecompressor().decompressobj()
    parts: list[bytes] = []
    size = 0
    for i in range(0, len(body), _ZSTD_STEP):
        part = d.decompress(body[i : i + _ZSTD_STEP])
        size += len(part)
        if size > max_size:
            raise CompressionError(f"zstd body inflates to more than {max_size} bytes")
        parts.append(part)
        if d.eof:
            break
    if not d.eof:
        raise CompressionError("zstd body is truncated")
    return b"".join(parts)
