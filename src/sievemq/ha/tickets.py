"""One-time tickets for the HA port, pure: who may open a replication link (docs/protocol/replication.md §1).

A successful HA_CHECK (private code 30020, on the remoting port, where the ACL checks the requester) hands out a
ticket: random, valid for ``TICKET_TTL_S``, usable once, bound to the requester's IP. A connection to the HA port is
served only when its first bytes are a hello carrying a ticket issued to the connection's IP (unless the book was
made with ``check_address=False``: a slave behind a relay or NAT), not used and not expired; anything else is closed
before the server reads a report or sends a byte. The book is bounded: beyond
``MAX_TICKETS`` the oldest ticket is dropped (a legitimate slave uses its ticket within milliseconds).

The clock is the caller's (``now``, monotonic seconds), and the random source may be injected for tests.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sievemq.remoting.peers import canonical_ip

__all__ = ["MAX_TICKETS", "TICKET_CHARS", "TICKET_TTL_S", "Refusal", "TicketBook", "same_ip"]

TICKET_CHARS = 32
"""A ticket is 32 lowercase hex characters (128 random bits)."""
TICKET_TTL_S = 30.0
"""A ticket is good for this many seconds after it was issued."""
MAX_TICKETS = 1024
"""Tickets held at most; issuing one more drops the oldest."""


class Refusal(StrEnum):
    """Why a ticket does not open a link (for the log line; the peer is told nothing)."""

    UNKNOWN = "unknown ticket (never issued, already used, or dropped)"
    EXPIRED = "expired ticket"
    OTHER_IP = "ticket issued to another address"


@dataclass(frozen=True)
class _Issued:
    ip: str
    expires: float
    owner: str = ""


def same_ip(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` name the same address (``::ffff:10.0.0.1`` is ``10.0.0.1``)."""
    return canonical_ip(a) == canonical_ip(b)


class TicketBook:
    """The tickets handed out and not yet used or expired."""

    __slots__ = ("_issued", "_token", "check_address", "max_tickets", "ttl")

    def __init__(
        self,
        ttl: float = TICKET_TTL_S,
        max_tickets: int = MAX_TICKETS,
        token: Callable[[], str] = lambda: secrets.token_hex(TICKET_CHARS // 2),
        *,
        check_address: bool = True,
    ) -> None:
        """``check_address`` False: a ticket opens a link from any address (``haTicketChecksAddress``)."""
        if ttl <= 0 or max_tickets < 1:
            raise ValueError("TicketBook needs ttl > 0 and max_tickets >= 1")
        self.check_address = check_address
        self.ttl = ttl
        self.max_tickets = max_tickets
        self._token = token
        self._issued: OrderedDict[str, _Issued] = OrderedDict()  # oldest first

    def __len__(self) -> int:
        return len(self._issued)

    def issue(self, ip: str, now: float, owner: str = "") -> str:
        """A new ticket for one link from ``ip``, good until ``now + ttl``; ``owner`` names who asked (a replica's
        brokerId under automatic failover), for ``owner_of``."""
        self._drop_expired(now)
        while len(self._issued) >= self.max_tickets:
            self._issued.popitem(last=False)
        ticket = self._token()
        self._issued[ticket] = _Issued(canonical_ip(ip), now + self.ttl, owner)
        return ticket

    def owner_of(self, ticket: str) -> str:
        """Whom ``ticket`` was issued to ("" when unknown or issued without an owner); read before ``redeem``."""
        issued = self._issued.get(ticket)
        return issued.owner if issued is not None else ""

    def redeem(self, ticket: str, ip: str, now: float) -> Refusal | None:
        """None: ``ticket`` admits this connection from ``ip`` (and is used up). Else why not; a ticket shown from
        another address stays good for its own (a thief does not lock the slave out)."""
        issued = self._issued.get(ticket)
        self._drop_expired(now)
        if issued is None:
            return Refusal.UNKNOWN
        if issued.expires <= now:
            self._issued.pop(ticket, None)
            return Refusal.EXPIRED
        if self.check_address and issued.ip != canonical_ip(ip):
            return Refusal.OTHER_IP
        del self._issued[ticket]
        return None

    def _drop_expired(self, now: float) -> None:
        issued = self._issued
        while issued:
            ticket, first = next(iter(issued.items()))
            if first.expires > now:  # issued in order with one ttl: the rest expire later
                return
            del issued[ticket]
