"""Peer addresses in one spelling, and the peer a connection counts against: shared by the ACL's address
patterns, the servers' per-peer limits, the HA port's tickets and the dashboard's failed-login counts. Pure."""

from __future__ import annotations

import ipaddress

__all__ = ["IPAddress", "canonical_ip", "parse_ip", "peer_key"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_ip(text: str) -> IPAddress | None:
    """``text`` as an address (brackets and an IPv6 zone dropped, an IPv4-mapped IPv6 address as its IPv4 one);
    None when it is not one."""
    try:
        ip = ipaddress.ip_address(text.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def canonical_ip(text: str) -> str:
    """``text`` in one spelling (``::ffff:10.0.0.1`` is ``10.0.0.1``, ``2001:DB8:0::1`` is ``2001:db8::1``); not an
    address: as it is."""
    ip = parse_ip(text)
    return text if ip is None else str(ip)


def peer_key(text: str) -> str:
    """The peer an address counts against: the IPv4 address, or an IPv6 address's /64 (one host commonly holds a
    whole /64); not an address: as it is."""
    ip = parse_ip(text)
    if ip is None:
        return text
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((int(ip), 64), strict=False))
    return str(ip)
