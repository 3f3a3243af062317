"""The HA port's one-time tickets, pure: issued to an address, good once, for a while, and bounded."""

from __future__ import annotations

import itertools

import pytest

from sievemq.ha.tickets import TICKET_CHARS, Refusal, TicketBook, same_ip


def counting() -> TicketBook:
    n = itertools.count()
    return TicketBook(ttl=30.0, max_tickets=3, token=lambda: f"{next(n):032x}")


def test_a_ticket_opens_one_link_from_its_address() -> None:
    book = counting()
    t = book.issue("10.0.0.5", now=100.0)
    assert book.redeem(t, "10.0.0.6", now=101.0) is Refusal.OTHER_IP  # a thief elsewhere gets nothing...
    assert book.redeem(t, "10.0.0.5", now=102.0) is None  # ...and does not lock the slave out
    assert book.redeem(t, "10.0.0.5", now=103.0) is Refusal.UNKNOWN  # used up: a replay gets nothing
    assert len(book) == 0


def test_a_book_that_does_not_check_addresses() -> None:
    book = TicketBook(check_address=False)
    t = book.issue("10.0.0.5", now=0.0)
    assert book.redeem(t, "10.0.0.99", now=1.0) is None  # a relay's address: still once only
    assert book.redeem(t, "10.0.0.5", now=1.0) is Refusal.UNKNOWN


def test_tickets_expire() -> None:
    book = counting()
    t = book.issue("10.0.0.5", now=0.0)
    assert book.redeem(t, "10.0.0.5", now=30.0) is Refusal.EXPIRED
    assert book.redeem(t, "10.0.0.5", now=30.0) is Refusal.UNKNOWN
    book.issue("10.0.0.5", now=1.0)
    book.issue("10.0.0.5", now=40.0)  # issuing drops the expired ones
    assert len(book) == 1


def test_unknown_tickets_and_the_cap() -> None:
    book = counting()
    assert book.redeem("f" * 32, "10.0.0.5", now=0.0) is Refusal.UNKNOWN
    first, *rest = [book.issue("10.0.0.5", now=float(i)) for i in range(4)]  # one more than the cap
    assert len(book) == 3 and book.redeem(first, "10.0.0.5", now=5.0) is Refusal.UNKNOWN  # the oldest went
    assert all(book.redeem(t, "10.0.0.5", now=5.0) is None for t in rest)


def test_addresses_compare_in_one_spelling() -> None:
    book = counting()
    t = book.issue("::ffff:10.0.0.5", now=0.0)
    assert book.redeem(t, "10.0.0.5", now=1.0) is None
    assert same_ip("2001:db8::1", "2001:DB8:0::1") and not same_ip("10.0.0.5", "10.0.0.50")
    assert same_ip("not-an-ip", "not-an-ip")


def test_real_tickets_are_random_hex() -> None:
    book = TicketBook()
    a, b = book.issue("127.0.0.1", 0.0), book.issue("127.0.0.1", 0.0)
    assert a != b and len(a) == TICKET_CHARS and int(a, 16) >= 0 and a == a.lower()


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        TicketBook(ttl=0)
    with pytest.raises(ValueError):
        TicketBook(max_tickets=0)
