"""Remote-address patterns of plain_acl.yml, compiled and matched without sockets."""

from __future__ import annotations

import pytest

from sievemq.acl.addresses import AddressPatternError, compile_pattern, parse_ip


def matches(pattern: str, addr: str) -> bool:
    return compile_pattern(pattern).match(parse_ip(addr))


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["10.0.0.1"], []),
        ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1", "10.168.0.1"]),
        ("10.0.0.1-100", ["10.0.0.1", "10.0.0.100"], ["10.0.0.0", "10.0.0.101", "10.0.1.5"]),
        ("10.*.*.*", ["10.200.3.4"], ["11.0.0.1"]),
        ("192.168.1.{1,2,3}", ["192.168.1.1", "192.168.1.3"], ["192.168.1.4", "192.168.2.1"]),
        ("192.168.1.1,192.168.1.2", ["192.168.1.1", "192.168.1.2"], ["192.168.1.3"]),
        ("192.168.1.1,2,3", ["192.168.1.1", "192.168.1.2", "192.168.1.3"], ["192.168.1.4"]),
        ("127.0.0.1", ["127.0.0.1", "::ffff:127.0.0.1"], ["127.0.0.2"]),
        ("10.0.0.0/8", ["10.9.8.7"], ["11.0.0.1", "::1"]),
        ("2001:db8::1", ["2001:0db8:0:0::1"], ["2001:db8::2"]),
        ("2001:db8::/32", ["2001:db8:1::5"], ["2001:db9::1", "10.0.0.1"]),
        ("", [], ["1.2.3.4", "127.0.0.1"]),
    ],
)
def test_pattern_forms(pattern: str, yes: list[str], no: list[str]) -> None:
    for addr in yes:
        assert matches(pattern, addr), f"{pattern} should match {addr}"
    for addr in no:
        assert not matches(pattern, addr), f"{pattern} should not match {addr}"


def test_an_unreadable_peer_matches_only_every() -> None:
    assert compile_pattern("*").match(None)
    assert not compile_pattern("10.0.0.*").match(None)


@pytest.mark.parametrize(
    "bad",
    [
        "10.0.0.300",
        "10.0.0.9-1",
        "10.0.*",
        "300.*.*.*",
        "a.b.c.d",
        "2001:db8::*",
        "10.0.0.{1,x}",
        "{1,2}",
        "1.2.3.4/99",
    ],
)
def test_malformed_patterns_are_refused(bad: str) -> None:
    with pytest.raises(AddressPatternError):
        compile_pattern(bad)
