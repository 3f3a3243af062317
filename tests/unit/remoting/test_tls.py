"""TLS decisions without sockets: the first-byte routing, and a connection's gate and TLS session driven in memory
(a fake transport on the server side, an ``ssl.SSLObject`` over memory BIOs as the client)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

from sievemq.remoting.command import MAX_FRAME_LENGTH, RemotingCommand, encode_frame
from sievemq.remoting.tls import (
    HANDSHAKE_RECORD,
    ClientTls,
    Route,
    ServerTls,
    describe_failure,
    parse_mode,
    route_first_byte,
    server_context,
)
from sievemq.remoting.tls_transport import TlsAcceptor
from tests.integration.helpers import eventually
from tests.support.certs import Certs, make_certs

PEER = ("10.1.2.3", 4567)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("pki"))


@pytest.mark.parametrize(
    ("first", "mode", "route"),
    [
        (0x16, "disabled", Route.REFUSE),
        (0x16, "permissive", Route.TLS),
        (0x16, "enforcing", Route.TLS),
        (0x00, "disabled", Route.PLAIN),
        (0x00, "permissive", Route.PLAIN),
        (0x00, "enforcing", Route.REFUSE),
        (0x15, "permissive", Route.PLAIN),  # a TLS alert record is not a handshake
        (0x17, "enforcing", Route.REFUSE),
    ],
)
def test_first_byte_routes(first: int, mode: Any, route: Route) -> None:
    assert route_first_byte(first, mode) is route


def test_no_plain_frame_starts_like_a_tls_handshake() -> None:
    # The first byte of a frame is the top byte of its length: at most MAX_FRAME_LENGTH >> 24.
    assert MAX_FRAME_LENGTH >> 24 < HANDSHAKE_RECORD
    big = RemotingCommand.request(10, {"topic": "t"}, b"x" * (MAX_FRAME_LENGTH - 4096))
    assert encode_frame(big)[0][0] < HANDSHAKE_RECORD


def test_mode_names_in_any_case() -> None:
    assert parse_mode(" Permissive ") == "permissive"
    assert parse_mode("ENFORCING") == "enforcing"
    with pytest.raises(ValueError, match="disabled, permissive, enforcing"):
        parse_mode("strict")
    with pytest.raises(ValueError, match="needs an SSL context"):
        ServerTls("enforcing")


# ------------------------------------------------------------------------------------------ in memory
class FakeTransport:
    """The server side's raw transport: records what is written, who its protocol is, and how it ended."""

    def __init__(self, protocol: asyncio.Protocol) -> None:
        self.protocol = protocol
        self.written = bytearray()
        self.aborted = self.closed = False
        self.limits: tuple[int | None, int | None] | None = None

    def write(self, data: bytes) -> None:
        self.written += data

    def take(self) -> bytes:
        out, self.written = bytes(self.written), bytearray()
        return out

    def set_protocol(self, protocol: asyncio.Protocol) -> None:
        self.protocol = protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return PEER if name == "peername" else default

    def abort(self) -> None:
        if not self.aborted:  # as a real transport does, it tells its protocol
            self.aborted = True
            self.protocol.connection_lost(None)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.aborted or self.closed

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.limits = (high, low)

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class App(asyncio.Protocol):
    """The serving protocol: what it was given."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.data = bytearray()
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


class Harness:
    """One acceptor, one connection through it, its warnings and the apps it made."""

    def __init__(
        self, certs: Certs, mode: Any, timeout: float = 5.0, auth_client: bool = False, slots: int = 1
    ) -> None:
        context = server_context(str(certs.server.cert), str(certs.server.key), "", str(certs.ca.cert), auth_client)
        self.warnings: list[str] = []
        self.apps: list[App] = []
        self.slots = slots
        """Connection slots the peer has (``ServerGuard.enter``): each gate takes one until it is served or ends."""
        self.acceptor = TlsAcceptor(ServerTls(mode, context), self._make, self._warn, timeout, self._enter, self._leave)
        gate = self.acceptor()
        self.raw = FakeTransport(gate)
        gate.connection_made(self.raw)  # type: ignore[arg-type]

    def _make(self) -> App:
        self.apps.append(App())
        return self.apps[-1]

    def _warn(self, ip: str, msg: str, *args: object) -> None:
        self.warnings.append(f"{ip} " + msg % args)

    def _enter(self, peer: tuple[str, int]) -> str | None:
        if self.slots <= 0:
            return None
        self.slots -= 1
        return peer[0]

    def _leave(self, key: str) -> None:
        assert key == PEER[0]
        self.slots += 1

    def feed(self, data: bytes) -> None:
        self.raw.protocol.data_received(data)


class TlsClient:
    """A TLS client over memory BIOs, talking to a Harness."""

    def __init__(self, h: Harness, tls: ClientTls) -> None:
        self.h = h
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = tls.context().wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")

    def pump(self) -> None:
        """Exchange what each side has written until neither writes more."""
        for _ in range(10):
            try:
                self.obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            out = self.outgoing.read()
            if out:
                self.h.feed(out)
            back = self.h.raw.take()
            self.incoming.write(back)
            if not out and not back:
                return

    def read(self) -> bytes:
        got = bytearray()
        while True:
            try:
                chunk = self.obj.read(65536)
            except ssl.SSLWantReadError:
                return bytes(got)
            if not chunk:  # the server's close_notify
                return bytes(got)
            got += chunk


async def test_tls_connection_is_served_decrypted(certs: Certs) -> None:
    h = Harness(certs, "permissive")
    client = TlsClient(h, ClientTls(ca_file=str(certs.ca.cert)))
    client.pump()
    assert len(h.apps) == 1 and h.apps[0].transport is not None, h.warnings
    app = h.apps[0]
    assert not h.acceptor.pending, "a served connection is no longer pending"
    client.obj.write(b"hello over TLS")
    client.pump()
    assert bytes(app.data) == b"hello over TLS"
    app.transport.writelines([b"answer ", b"in one record"])
    client.incoming.write(h.raw.take())
    assert client.read() == b"answer in one record"
    assert app.transport.get_extra_info("peername") == PEER
    assert app.transport.get_extra_info("cipher") is not None
    app.transport.set_write_buffer_limits(high=1024)
    assert h.raw.limits == (1024, None)
    app.transport.close()  # close_notify, then the raw transport
    client.incoming.write(h.raw.take())
    assert client.read() == b"" and h.raw.closed
    assert h.warnings == []


async def test_plain_connection_is_handed_over_untouched(certs: Certs) -> None:
    h = Harness(certs, "permissive")
    h.feed(b"\x00\x00\x00\x10rest of a frame")
    assert len(h.apps) == 1 and h.apps[0].transport is h.raw
    assert h.raw.protocol is h.apps[0], "the serving protocol is the raw transport's own: no wrapper"
    assert bytes(h.apps[0].data) == b"\x00\x00\x00\x10rest of a frame"
    assert not h.acceptor.pending


async def test_a_connection_in_its_handshake_holds_a_slot_until_it_is_served_or_ends(certs: Certs) -> None:
    h = Harness(certs, "permissive")
    assert h.slots == 0  # taken by the gate
    h.feed(b"\x00\x00\x00\x10plain")
    assert h.slots == 1 and len(h.apps) == 1  # handed to the server's Connection, which takes its own
    timed_out = Harness(certs, "permissive", timeout=0.05)
    await eventually(lambda: timed_out.raw.aborted, timeout=5.0, what="the silent connection's timeout")
    assert timed_out.raw.aborted and timed_out.slots == 1
    refused = Harness(certs, "permissive", slots=0)  # the guard refused it: over a cap
    assert refused.raw.aborted and not refused.acceptor.pending and refused.slots == 0
    refused.feed(b"\x16")
    assert refused.apps == []


async def test_enforcing_refuses_plain_and_serves_nothing(certs: Certs) -> None:
    h = Harness(certs, "enforcing")
    h.feed(b"\x00\x00\x00\x10plain")
    assert h.apps == [] and h.raw.aborted and h.acceptor.refused == 1
    assert h.warnings == [f"{PEER[0]} closing connection from {PEER[0]}:{PEER[1]}: not TLS, and tlsMode is enforcing"]


async def test_a_bad_handshake_closes_only_with_a_warning(certs: Certs) -> None:
    h = Harness(certs, "permissive")
    h.feed(bytes([HANDSHAKE_RECORD, 3, 1, 0, 5]) + b"junk!")
    assert h.apps == [] and h.raw.aborted and h.acceptor.failed == 1
    assert len(h.warnings) == 1 and "TLS handshake failed" in h.warnings[0], h.warnings


async def test_stopping_the_server_aborts_handshakes_quietly(certs: Certs) -> None:
    h = Harness(certs, "permissive")
    client = TlsClient(h, ClientTls(ca_file=str(certs.ca.cert)))
    try:
        client.obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    h.feed(client.outgoing.read())
    assert h.acceptor.pending
    h.acceptor.close()
    assert h.raw.aborted and not h.acceptor.pending and h.warnings == [] and h.acceptor.failed == 0


async def test_a_client_that_does_not_trust_us_is_reported(certs: Certs) -> None:
    h = Harness(certs, "enforcing")
    client = TlsClient(h, ClientTls(ca_file=str(certs.rogue_ca.cert)))
    with pytest.raises(ssl.SSLCertVerificationError):
        for _ in range(3):
            client.pump()
            client.obj.do_handshake()
    h.feed(client.outgoing.read())  # its alert
    assert h.apps == [] and h.raw.aborted
    assert "TLS handshake failed" in h.warnings[0] and "UNKNOWN_CA" in h.warnings[0].upper(), h.warnings


async def test_client_certificate_required(certs: Certs) -> None:
    with_cert = Harness(certs, "enforcing", auth_client=True)
    ok = ClientTls(ca_file=str(certs.ca.cert), cert_file=str(certs.client.cert), key_file=str(certs.client.key))
    TlsClient(with_cert, ok).pump()
    assert len(with_cert.apps) == 1
    assert with_cert.apps[0].transport.get_extra_info("peercert")["subject"] == (
        (("commonName", "sievemq test client"),),
    )

    without = Harness(certs, "enforcing", auth_client=True)
    TlsClient(without, ClientTls(ca_file=str(certs.ca.cert))).pump()
    assert without.apps == [] and without.raw.aborted
    assert "CERTIFICATE" in without.warnings[0].upper(), without.warnings


async def test_silent_connection_times_out(certs: Certs) -> None:
    h = Harness(certs, "permissive", timeout=0.05)
    await eventually(lambda: h.raw.aborted, timeout=5.0, what="the silent connection's timeout")
    assert h.raw.aborted and h.apps == [] and not h.acceptor.pending
    assert h.warnings == [f"{PEER[0]} closing connection from {PEER[0]}:{PEER[1]}: no first byte within 0.05 s"]


async def test_stalled_handshake_times_out(certs: Certs) -> None:
    h = Harness(certs, "permissive", timeout=0.05)
    client = TlsClient(h, ClientTls(ca_file=str(certs.ca.cert)))
    try:
        client.obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    h.feed(client.outgoing.read())  # the ClientHello, then nothing more
    await eventually(lambda: h.raw.aborted, timeout=5.0, what="the handshake's timeout")
    assert h.raw.aborted and h.apps == [] and h.acceptor.failed == 1
    assert len(h.warnings) == 1 and "no TLS handshake within 0.05 s" in h.warnings[0], h.warnings


def test_client_failure_messages_say_what_to_do(certs: Certs, tmp_path: Path) -> None:
    err = ssl.SSLCertVerificationError(1, "certificate verify failed")
    err.verify_message = "self-signed certificate"
    text = describe_failure("127.0.0.1", 9876, err)
    assert "not trusted (self-signed certificate)" in text and "--tls-ca" in text and "--tls-insecure" in text
    assert "tlsMode may be disabled" in describe_failure("h", 1, ConnectionResetError(104, "reset"))
