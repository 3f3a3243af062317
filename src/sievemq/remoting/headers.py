"""Reading typed values out of ``extFields``, leniently (clients send numbers, booleans and strings alike)."""

from __future__ import annotations

from collections.abc import Mapping

from sievemq.errors import HeaderError


def get_str(fields: Mapping[str, str], key: str, default: str | None = None) -> str | None:
    """A string field, or ``default`` when absent or empty."""
    v = fields.get(key)
    return v if v else default


def require_str(fields: Mapping[str, str], key: str) -> str:
    """A string field that must be present and non-empty."""
    v = fields.get(key)
    if not v:
        raise HeaderError(f"request header field '{key}' is missing")
    return v


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_MAX_DIGITS = 40
"""Longer numbers are refused unread (``int()`` of a huge digit string costs quadratic time)."""


def parse_int(key: str, v: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """``v`` as an integer in ``lo..hi`` (a Java ``long`` by default); HeaderError naming ``key`` otherwise.

    Accepts what clients send for numbers: decimal digits, or an integral float such as ``3.0``.
    """
    if len(v) > _MAX_DIGITS:
        raise HeaderError(f"request header field '{key}' must be an integer in {lo}..{hi}, got {v[:40]!r}...")
    try:
        n = int(v)
    except ValueError:
        try:
            f = float(v)
        except ValueError:
            raise HeaderError(f"request header field '{key}' must be an integer, got {v!r}") from None
        if not f.is_integer():
            raise HeaderError(f"request header field '{key}' must be an integer, got {v!r}") from None
        n = int(f)
    if not lo <= n <= hi:
        raise HeaderError(f"request header field '{key}' must be an integer in {lo}..{hi}, got {v}")
    return n


def get_int(fields: Mapping[str, str], key: str, default: int | None = None) -> int | None:
    """An integer field (a Java ``long``); ``default`` when absent; HeaderError when not a number or out of range."""
    v = fields.get(key)
    if v is None or v == "" or v == "null":
        return default
    return parse_int(key, v)


def require_int(fields: Mapping[str, str], key: str) -> int:
    """An integer field that must be present."""
    v = get_int(fields, key)
    if v is None:
        raise HeaderError(f"request header field '{key}' is missing")
    return v


def get_bool(fields: Mapping[str, str], key: str, default: bool = False) -> bool:
    """A boolean field: ``true`` in any case, or ``1``, is True; absent is ``default``.

    Java's Boolean.parseBoolean reads ``1`` as false, but the C++ core of the PyPI ``rocketmq`` 0.4.x client
    sends its batch flag as ``"1"``, and honouring it is the only way its batches arrive as batches.
    """
    v = fields.get(key)
    if v is None or v == "":
        return default
    return v.strip().lower() in ("true", "1")


def int_or(fields: Mapping[str, str], key: str, default: int) -> int:
    """An integer field, ``default`` when absent (0 stays 0)."""
    v = get_int(fields, key)
    return default if v is None else v
