"""Remote-address patterns of ``plain_acl.yml`` (``globalWhiteRemoteAddresses``, ``whiteRemoteAddress``).

The forms are RocketMQ's (docs/protocol/acl.md §2): ``*`` (every address), one address (IPv4 or IPv6), a list of
addresses separated by commas, ``192.168.1.{1,2,3}`` (choices for the last part), and IPv4 parts written as ``*``
or as a range ``1-100`` (``192.168.0.*``, ``10.0.0.1-100``). Two sievemq extensions: ``192.168.1.1,2,3`` (bare
numbers after the first address complete its first three parts) and CIDR blocks (``10.0.0.0/8``,
``2001:db8::/32``). An empty pattern matches nothing.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from sievemq.remoting.peers import IPAddress, parse_ip

__all__ = ["AddressPattern", "AddressPatternError", "IPAddress", "compile_pattern", "parse_ip"]

_EVERY = frozenset(("*", "*.*.*.*", "*:*:*:*:*:*:*:*"))


class AddressPatternError(ValueError):
    """A pattern that is none of the accepted forms (the message says why)."""


def _one(text: str, pattern: str) -> IPAddress:
    ip = parse_ip(text)
    if ip is None:
        raise AddressPatternError(f"{text!r} in {pattern!r} is not an IPv4 or IPv6 address")
    return ip


def _octet(text: str, pattern: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > 255:
        raise AddressPatternError(f"{text!r} in {pattern!r} is not a number in 0..255")
    return int(text)


def _part_range(part: str, pattern: str) -> tuple[int, int]:
    if part == "*":
        return 0, 255
    lo, sep, hi = part.partition("-")
    if not sep:
        n = _octet(part, pattern)
        return n, n
    start, end = _octet(lo, pattern), _octet(hi, pattern)
    if start > end:
        raise AddressPatternError(f"range {part!r} in {pattern!r} starts after it ends")
    return start, end


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One compiled pattern; ``match`` tells whether an address is covered."""

    text: str
    every: bool = False
    exact: frozenset[IPAddress] = frozenset()
    ranges: tuple[tuple[int, int], ...] = ()
    """IPv4 only: an inclusive range per part, four of them."""
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None

    def match(self, ip: IPAddress | None) -> bool:
        """True when ``ip`` is covered (None, an unreadable peer address, only by ``*``)."""
        if self.every:
            return True
        if ip is None:
            return False
        if self.exact:
            return ip in self.exact
        if self.network is not None:
            return ip.version == self.network.version and ip in self.network
        if self.ranges and isinstance(ip, ipaddress.IPv4Address):
            parts = ip.packed
            return all(lo <= parts[i] <= hi for i, (lo, hi) in enumerate(self.ranges))
        return False


def compile_pattern(text: str | None) -> AddressPattern:
    """The pattern ``text`` compiled; ``AddressPatternError`` when it is none of the forms."""
    pattern = (text or "").strip()
    if not pattern:
        return AddressPattern("")
    if pattern in _EVERY:
        return AddressPattern(pattern, every=True)
    if "/" in pattern:
        try:
            return AddressPattern(pattern, network=ipaddress.ip_network(pattern, strict=False))
        except ValueError as e:
            raise AddressPatternError(f"{pattern!r} is not a CIDR block: {e}") from None
    if pattern.endswith("}"):
        head, sep, choices = pattern[:-1].partition("{")
        if not sep or not head:
            raise AddressPatternError(f"{pattern!r}: a choice list is written a.b.c.{{1,2,3}}")
        return AddressPattern(pattern, exact=frozenset(_one(head + c.strip(), pattern) for c in choices.split(",")))
    if "," in pattern:
        items = [i.strip() for i in pattern.split(",") if i.strip()]
        first = items[0]
        prefix = first[: first.rfind(".") + 1] if "." in first else ""
        full = [prefix + i if prefix and i.isdigit() else i for i in items]
        return AddressPattern(pattern, exact=frozenset(_one(i, pattern) for i in full))
    if "*" in pattern or "-" in pattern:
        if ":" in pattern:
            raise AddressPatternError(f"{pattern!r}: IPv6 ranges are not supported; write a CIDR block instead")
        parts = pattern.split(".")
        if len(parts) != 4:
            raise AddressPatternError(f"{pattern!r} does not have four parts separated by '.'")
        return AddressPattern(pattern, ranges=tuple(_part_range(p.strip(), pattern) for p in parts))
    return AddressPattern(pattern, exact=frozenset((_one(pattern, pattern),)))
