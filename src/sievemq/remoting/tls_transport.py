"""A server's new connections in tlsMode permissive or enforcing: the first byte decides, then TLS or plain TCP.

``TlsAcceptor`` is the protocol factory of such a server. Each connection starts with a ``FirstByteGate``; its
first read is routed by ``route_first_byte`` (tls.py). Plain TCP: the connection is handed, with the bytes
read, to a normal ``Connection`` on the same transport (so plain connections cost nothing more once served).
TLS: a ``TlsSession`` takes over the transport and runs TLS in memory (``ssl.MemoryBIO``), fed the bytes already
read. ``loop.start_tls`` cannot be used: it cannot be given bytes already read, and uvloop starts reading as soon
as a protocol's ``connection_made`` returns, so the first byte cannot be left in the socket (docs/protocol/tls.md
§3). Once its handshake is done, the session hands a ``TlsTransport`` to a normal ``Connection``.

A connection must send its first byte and finish its handshake within ``timeout`` seconds; a refused connection,
a failed handshake or a timeout closes that connection only, with a warning rate-limited per peer IP. Until it is
served, a connection holds one of its peer's connection slots (``enter``/``leave``: the server's ``ServerGuard``),
so that connections in their handshake count against the per-peer and server caps too (docs/server-limits.md §3).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Iterable
from typing import Any, cast

from sievemq.remoting.tls import Route, ServerTls, route_first_byte

log = logging.getLogger(__name__)

PeerWarn = Callable[..., None]
"""``(peer ip, message, *args)``: a warning, rate-limited per peer IP (``ServerGuard.warn_peer``)."""
Enter = Callable[[tuple[str, int]], str | None]
"""``(peer) -> slot key``, None when the connection is refused (``ServerGuard.enter``)."""
Leave = Callable[[str], None]
"""Gives a slot back (``ServerGuard.leave``)."""


def _enter_any(peer: tuple[str, int]) -> str | None:
    return peer[0]


def _leave_any(key: str) -> None:
    return None


READ_SIZE = 256 * 1024


class TlsAcceptor:
    """The protocol factory of a server whose TLS mode is permissive or enforcing."""

    def __init__(
        self,
        tls: ServerTls,
        make: Callable[[], asyncio.Protocol],
        warn: PeerWarn,
        timeout: float,
        enter: Enter = _enter_any,
        leave: Leave = _leave_any,
    ) -> None:
        if tls.context is None:
            raise ValueError("a TlsAcceptor needs tlsMode permissive or enforcing")
        self.mode = tls.mode
        self.context = tls.context
        self.make = make
        """Makes the protocol that serves a connection once it is routed (the server's ``Connection``)."""
        self.warn = warn
        self.timeout = timeout
        self.enter = enter
        self.leave = leave
        self.pending: set[FirstByteGate] = set()
        """Connections still before their first byte or in their handshake."""
        self.refused = 0
        self.failed = 0

    def __call__(self) -> FirstByteGate:
        return FirstByteGate(self)

    def close(self) -> None:
        """Abort every connection not yet served."""
        for gate in list(self.pending):
            gate.abort()


class FirstByteGate(asyncio.Protocol):
    """A new connection until it is served: waits for the first byte, routes it, bounds the handshake's time."""

    def __init__(self, acceptor: TlsAcceptor) -> None:
        self._acceptor = acceptor
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._session: TlsSession | None = None
        self._ended = False
        """Served, refused, failed or timed out: nothing more to report."""
        self._slot: str | None = None
        """The peer slot it holds until it is served or ends."""
        self.peer: tuple[str, int] = ("0.0.0.0", 0)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (str(peer[0]), int(peer[1]))
        self._slot = self._acceptor.enter(self.peer)
        if self._slot is None:  # over a cap: the guard said why
            self._ended = True
            refused = self._transport
            self._transport = None
            refused.abort()
            return
        self._acceptor.pending.add(self)
        self._timer = asyncio.get_running_loop().call_later(self._acceptor.timeout, self._expired)

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        if not data or transport is None:
            return
        acceptor = self._acceptor
        route = route_first_byte(data[0], acceptor.mode)
        if route is Route.PLAIN:
            self._served()
            conn = acceptor.make()
            transport.set_protocol(conn)
            conn.connection_made(transport)
            if not transport.is_closing():  # not refused by the server's connection cap
                conn.data_received(data)
        elif route is Route.TLS:
            self._session = TlsSession(acceptor.context, transport, self)
            self._session.data_received(data)
        else:
            acceptor.refused += 1
            acceptor.warn(self.peer[0], "closing connection from %s:%d: not TLS, and tlsMode is %s", *self.peer,
                          acceptor.mode)  # fmt: skip
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._served()

    # ------------------------------------------------------------------ called by the session
    def handshake_done(self, session: TlsSession) -> asyncio.Protocol:
        """The session is open: the protocol that serves it, told ``connection_made``."""
        self._served()
        conn = self._acceptor.make()
        conn.connection_made(session.transport)
        return conn

    def handshake_failed(self, exc: Exception) -> None:
        """The handshake failed (the alert, if any, was sent): warn and close, unless already ended (by the
        timeout, or the server's stop: the session reports the close that follows)."""
        if self._ended:
            return
        self._acceptor.failed += 1
        reason = exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else exc
        self._acceptor.warn(self.peer[0], "closing connection from %s:%d: TLS handshake failed: %s", *self.peer,
                            reason)  # fmt: skip
        self.abort()

    # ------------------------------------------------------------------ internal
    def _expired(self) -> None:
        self._acceptor.failed += 1
        what = "TLS handshake" if self._session is not None else "first byte"
        self._acceptor.warn(self.peer[0], "closing connection from %s:%d: no %s within %g s", *self.peer, what,
                            self._acceptor.timeout)  # fmt: skip
        self.abort()

    def _served(self) -> None:
        self._ended = True
        self._acceptor.pending.discard(self)
        if self._slot is not None:
            self._acceptor.leave(self._slot)
            self._slot = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def abort(self) -> None:
        """Close the connection at once."""
        self._served()
        if self._transport is not None:
            self._transport.abort()


class TlsSession(asyncio.Protocol):
    """TLS over one transport, in memory: the transport's protocol once a connection is routed to TLS.

    Received bytes go into the incoming BIO and come out decrypted to the serving protocol; what that protocol
    writes to ``transport`` is encrypted into the outgoing BIO and written to the real transport at once, so
    the real transport's buffer (and its pause/resume_writing) is the only one.
    """

    def __init__(self, context: ssl.SSLContext, raw: asyncio.Transport, gate: FirstByteGate) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._in, self._out, server_side=True)
        self._raw = raw
        self._gate: FirstByteGate | None = gate
        self._app: asyncio.Protocol | None = None
        self._closing = False
        self.transport = TlsTransport(self)
        raw.set_protocol(self)

    # ------------------------------------------------------------------ the real transport's protocol
    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._in.write(data)
        if self._app is None and not self._handshake():
            return
        chunks: list[bytes] = []
        closed = False
        try:
            while True:
                chunk = self._ssl.read(READ_SIZE)
                if not chunk:  # the peer's close_notify
                    closed = True
                    break
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as e:
            log.debug("TLS error on %s:%d: %s", *self.transport.peer, e)
            closed = True
        self._flush()  # what reading produced (a key update's answer, for one)
        if chunks and self._app is not None and not self._closing:
            self._app.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if closed:
            self.close()

    def eof_received(self) -> bool | None:
        return False  # a TCP close without close_notify: close too

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        gate, self._gate = self._gate, None
        if gate is not None:  # in the handshake: the client gave up (most often, it does not trust our certificate)
            gate.handshake_failed(exc or ConnectionResetError("closed by the client (does it trust the certificate?)"))
        if self._app is not None:
            self._app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._app is not None:
            self._app.pause_writing()

    def resume_writing(self) -> None:
        if self._app is not None:
            self._app.resume_writing()

    # ------------------------------------------------------------------ internal
    def _handshake(self) -> bool:
        """Advance the handshake; True once it is done (and the serving protocol has been made)."""
        gate = self._gate
        assert gate is not None
        try:
            self._ssl.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return False
        except (ssl.SSLError, OSError, ValueError) as e:
            self._flush()  # the alert that tells the client why
            self._gate = None
            self._closing = True
            gate.handshake_failed(e)
            return False
        self._flush()
        self._gate = None
        self._app = gate.handshake_done(self)
        return True

    def _flush(self) -> None:
        if self._out.pending:
            self._raw.write(self._out.read())

    # ------------------------------------------------------------------ for TlsTransport
    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send ``data``."""
        if self._closing or not data:
            return
        self._ssl.write(data)
        self._flush()

    def close(self) -> None:
        """Send close_notify, then close the real transport once what was written is sent."""
        if self._closing:
            return
        self._closing = True
        try:
            self._ssl.unwrap()
        except ssl.SSLError:
            pass  # the peer's close_notify is not waited for
        self._flush()
        self._raw.close()

    @property
    def raw(self) -> asyncio.Transport:
        """The real transport."""
        return self._raw

    @property
    def ssl_object(self) -> ssl.SSLObject:
        """The TLS state (peer certificate, cipher, version)."""
        return self._ssl

    @property
    def closing(self) -> bool:
        """True once closing or closed."""
        return self._closing or self._raw.is_closing()


class TlsTransport(asyncio.Transport):
    """What the serving protocol of a TLS connection writes to: the session's plaintext side."""

    def __init__(self, session: TlsSession) -> None:
        super().__init__()
        self._session = session
        peer = session.raw.get_extra_info("peername")
        self.peer: tuple[str, int] = (str(peer[0]), int(peer[1])) if peer else ("0.0.0.0", 0)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._session.write(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self._session.write(b"".join(list_of_data))  # one TLS record for a frame's header and body

    def close(self) -> None:
        self._session.close()

    def abort(self) -> None:
        self._session.raw.abort()

    def is_closing(self) -> bool:
        return self._session.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        tls = self._session.ssl_object
        if name == "ssl_object":
            return tls
        if name == "peercert":
            return tls.getpeercert()
        if name == "cipher":
            return tls.cipher()
        return self._session.raw.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._session.raw.pause_reading()

    def resume_reading(self) -> None:
        self._session.raw.resume_reading()

    def is_reading(self) -> bool:
        return self._session.raw.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._session.raw.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._session.raw.get_write_buffer_size()

    def can_write_eof(self) -> bool:
        return False
