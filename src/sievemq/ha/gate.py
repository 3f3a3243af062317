"""The HA port's door: a connection is served only after a good hello (docs/protocol/replication.md §1).

The gate reads the hello (``wire.HELLO``) with a short timeout before anything else, and redeems its ticket
(``tickets.TicketBook``). No hello, a bad one, or a ticket that is unknown, used, expired or issued to another
address: the connection is closed at once, nothing is read past the hello and nothing is sent, and the log gets one
warning naming the peer (at most one line per peer IP per ``warning_interval_s``). Bounded: at most
``max_pending`` connections wait for their hello; one more closes the oldest waiting (a slave sends its hello with
its first packet, so only idle strangers are pushed out).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from sievemq.ha.tickets import TicketBook
from sievemq.ha.wire import HELLO, WireError, decode_hello
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note

__all__ = ["HELLO_TIMEOUT_S", "MAX_PENDING", "HelloGate"]

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 3.0
"""A connection that has not sent its whole hello this long after it was accepted is closed."""
MAX_PENDING = 64
"""Connections waiting for their hello at most."""
_WARN_KEYS = 256


class HelloGate:
    """Admits connections to the HA port that show a ticket issued to their address."""

    def __init__(
        self,
        tickets: TicketBook,
        *,
        timeout_s: float = HELLO_TIMEOUT_S,
        max_pending: int = MAX_PENDING,
        warning_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` is the one ``tickets`` was issued with."""
        self.tickets = tickets
        self.timeout_s = timeout_s
        self.max_pending = max_pending
        self.refused = 0
        """Connections closed at the gate so far."""
        self._clock = clock
        self._pending: OrderedDict[int, asyncio.StreamWriter] = OrderedDict()
        self._pushed_out: set[int] = set()
        self._warnings = RateLimitedLog(warning_interval_s, max_keys=_WARN_KEYS)

    @property
    def pending(self) -> int:
        """Connections waiting for their hello now."""
        return len(self._pending)

    async def admit(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: tuple[str, int]
    ) -> str | None:
        """Read the hello of the connection from ``peer``; its ticket's owner ("" for none): serve it. None: the
        caller closes it."""
        key = id(writer)
        if len(self._pending) >= self.max_pending:
            old_key, oldest = self._pending.popitem(last=False)
            self._pushed_out.add(old_key)
            oldest.transport.abort()  # its admit() sees the end of its stream and returns False
        self._pending[key] = writer
        why: str
        try:
            async with asyncio.timeout(self.timeout_s):
                data = await reader.readexactly(HELLO.size)
            ticket = decode_hello(data)
        except TimeoutError:
            why = f"no hello within {self.timeout_s:g}s"
        except asyncio.IncompleteReadError as e:
            why = f"closed after {len(e.partial)} bytes, before a whole hello"
        except ConnectionError as e:
            why = f"connection error before its hello: {e}"
        except WireError as e:
            why = str(e)
        else:
            owner = self.tickets.owner_of(ticket)
            refusal = self.tickets.redeem(ticket, peer[0], self._clock())
            if refusal is None:
                return owner
            why = refusal.value
        finally:
            self._pending.pop(key, None)
        if key in self._pushed_out:
            self._pushed_out.discard(key)
            why = f"{self.max_pending} connections waited for their hello; the oldest is closed"
        self._refuse(peer, why)
        return None

    def _refuse(self, peer: tuple[str, int], why: str) -> None:
        self.refused += 1
        if len(self._warnings) >= _WARN_KEYS:
            self._warnings.prune()
        held_back = self._warnings.allow(peer[0])
        if held_back is not None:
            log.warning("HA port: closed the connection from %s:%d unserved: %s (a replication link needs a ticket "
                        "from HA_CHECK; docs/protocol/replication.md §1)%s", peer[0], peer[1], why,
                        suppressed_note(held_back))  # fmt: skip
