"""TLS on the remoting port: the server modes, the first-byte decision and the SSL contexts (docs/protocol/tls.md).

A server runs in one of three modes (RocketMQ's ``tls.server.mode``): ``disabled`` (plain TCP only), ``permissive``
(TLS and plain TCP on the same port, told apart by the first byte a client sends) or ``enforcing`` (TLS only).
Nothing here does I/O; the connections themselves are in tls_transport.py.
"""

from __future__ import annotations

import enum
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TlsMode = Literal["disabled", "permissive", "enforcing"]
TLS_MODES: tuple[TlsMode, ...] = ("disabled", "permissive", "enforcing")
HANDSHAKE_RECORD = 0x16
"""The first byte of every TLS connection (a handshake record). No remoting frame starts with it: it would be the
top byte of a frame length of at least 0x16000000 bytes, far above the frame limit (docs/protocol/tls.md §2)."""


class Route(enum.Enum):
    """What a server does with a new connection, from its first byte."""

    TLS = "tls"
    PLAIN = "plain"
    REFUSE = "refuse"


def route_first_byte(first: int, mode: TlsMode) -> Route:
    """TLS for a handshake record unless TLS is disabled; plain TCP for anything else unless TLS is enforced."""
    if first == HANDSHAKE_RECORD:
        return Route.REFUSE if mode == "disabled" else Route.TLS
    return Route.REFUSE if mode == "enforcing" else Route.PLAIN


def parse_mode(value: str) -> TlsMode:
    """A mode from its name in any letter case; ValueError for anything else."""
    for mode in TLS_MODES:
        if value.strip().lower() == mode:
            return mode
    raise ValueError(f"TLS mode {value!r} is not one of {', '.join(TLS_MODES)}")


class TlsFileError(ValueError):
    """A certificate, key or trust file does not load; ``which`` says which one (``cert``, ``key``,
    ``password``, ``trust``) so that a config can name its key, ``expected`` what it should be, ``problem`` why
    it is not."""

    def __init__(self, which: str, path: str, expected: str, problem: str) -> None:
        super().__init__(f"{path}: expected {expected} ({problem})")
        self.which = which
        self.path = path
        self.expected = expected
        self.problem = problem


def _no_password() -> bytes:
    return b""  # never let OpenSSL prompt on the terminal for an encrypted key


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, password: str) -> None:
    """``ctx.load_cert_chain`` with an error that says which file, or the password, is wrong."""
    try:
        ssl.create_default_context(cafile=cert)  # the certificates alone, to tell them apart from the key
    except (OSError, ValueError) as e:
        raise TlsFileError("cert", cert, "a PEM certificate chain", str(e)) from None
    try:
        ctx.load_cert_chain(cert, key or None, password=password or _no_password)
    except ssl.SSLError as e:
        if "KEY_VALUES_MISMATCH" in str(e):
            raise TlsFileError("key", key, f"the private key of {cert}", "it belongs to another certificate") from None
        if "ENCRYPTED" in Path(key or cert).read_text(errors="replace"):
            problem = "wrong password" if password else "the key is encrypted and no password was given"
            raise TlsFileError("password", key, f"the password of {key}", problem) from None
        raise TlsFileError("key", key, "a PEM private key", str(e)) from None
    except OSError as e:
        raise TlsFileError("key", key, "a PEM private key", str(e)) from None


def _load_trust(ctx: ssl.SSLContext, trust: str) -> None:
    try:
        ctx.load_verify_locations(cafile=trust)
    except (OSError, ValueError) as e:
        raise TlsFileError("trust", trust, "a PEM file of trusted certificates", str(e)) from None


def server_context(
    cert: str, key: str, password: str = "", trust: str = "", auth_client: bool = False
) -> ssl.SSLContext:
    """The context of a server: its certificate chain and key; with ``auth_client``, client certificates are
    required and must chain to ``trust``. TlsFileError when a file does not load."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # a connection's TLS layer never has to read in order to write
    _load_chain(ctx, cert, key, password)
    if auth_client:
        ctx.verify_mode = ssl.CERT_REQUIRED
        _load_trust(ctx, trust)
    return ctx


@dataclass(frozen=True)
class ClientTls:
    """TLS for a client's connections: whom to trust, which certificate to show, whether to verify.

    ``ca_file`` empty: the system's trusted certificates. ``verify=False`` accepts any server certificate and
    name (for a self-signed development certificate only: anyone in the path can read and change the traffic).
    """

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    key_password: str = ""
    verify: bool = True

    def context(self) -> ssl.SSLContext:
        """The SSL context (TlsFileError when a file does not load)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.verify:
            if self.ca_file:
                _load_trust(ctx, self.ca_file)
            else:
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
            ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # a trusted intermediate or leaf is enough
        else:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            _load_chain(ctx, self.cert_file, self.key_file, self.key_password)
        return ctx


@dataclass(frozen=True)
class ServerTls:
    """A server's TLS: its mode and, unless disabled, its context."""

    mode: TlsMode
    context: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        if self.mode != "disabled" and self.context is None:
            raise ValueError(f"tlsMode {self.mode} needs an SSL context")

    @property
    def enabled(self) -> bool:
        """Whether connections can use TLS (permissive or enforcing)."""
        return self.mode != "disabled"


def in_handshake(exc: OSError) -> bool:
    """Whether a client's failed TLS connect failed after TCP connected (in the handshake)."""
    return isinstance(exc, ssl.SSLError | ConnectionError) and not isinstance(exc, ConnectionRefusedError)


def describe_failure(host: str, port: int, exc: BaseException) -> str:
    """A client's message for a TLS connection that failed, with what to do about it."""
    where = f"{host}:{port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"TLS: the certificate of {where} is not trusted ({exc.verify_message}); give the CA that signed it "
            "(tls_ca_file, --tls-ca), or for a self-signed development certificate turn verification off "
            "(tls_verify=False, --tls-insecure)"
        )
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake with {where} failed: {exc.reason or exc}"
    hint = "does it accept TLS? its tlsMode may be disabled"
    return f"TLS handshake with {where} failed: {exc or type(exc).__name__} ({hint})"
