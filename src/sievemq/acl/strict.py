"""Strict request signatures: the request code, every field's name and value, a time and a nonce signed, replays
refused (docs/protocol/acl.md §1.2).

RocketMQ's signature (``signature.py``) covers the values of the extFields and the body, not the request code nor
the fields' names, and nothing in it ties a request to one use: a captured request can be sent again, with its code
changed, or with its values split differently between fields. sievemq's signers add three fields before the
RocketMQ signature, so a RocketMQ broker still verifies them (it signs every field's value) and a sievemq server
can check more:

* ``SignedAt``: when the request was signed, milliseconds since the epoch;
* ``SignNonce``: ``<session>.<seq>``, a random session of the signer (16 to 64 of ``[0-9A-Za-z_-]``) and a
  sequence number that grows with every request it signs;
* ``StrictSignature``: Base64 of HMAC-SHA256, keyed with the secret key, over the tag ``sievemq-request-v2``, the
  request code (decimal), each extField but ``Signature`` and ``StrictSignature`` sorted by name (name, then value),
  and the body; every item is written as its length (4 bytes, big-endian) and its UTF-8 bytes.

A server verifies the strict signature whenever it is present: ``SignedAt`` within the window of its clock, the
HMAC, then the nonce (``ReplayGuard``: per account and session, the highest sequence number and a bitmap of the
ones just below it; a session is forgotten only once every request it signed is outside the window). With
``aclStrictSignatures`` (``admin``: requests of admin accounts; ``all``: every request) a plain signature is
refused. Pure, apart from the clock the caller passes.
"""

from __future__ import annotations

import base64
import hmac
import re
import secrets
import struct
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from sievemq.protocol.reasons import Reason

__all__ = [
    "NONCE",
    "SIGNED_AT",
    "STRICT_SIGNATURE",
    "ReplayGuard",
    "StrictMode",
    "StrictPolicy",
    "StrictSigner",
    "parse_nonce",
    "strict_policy",
    "strict_signature",
]

SIGNED_AT = "SignedAt"
NONCE = "SignNonce"
STRICT_SIGNATURE = "StrictSignature"
TAG = b"sievemq-request-v2"
_LEN = struct.Struct(">I")
_SKIP = frozenset(("Signature", STRICT_SIGNATURE))
_NONCE_RE = re.compile(r"^([0-9A-Za-z_-]{16,64})\.([0-9]{1,18})$")
WINDOW_BITS = 8192
"""Sequence numbers below a session's highest that are still told apart (older ones are refused)."""
MAX_SESSIONS = 50_000
"""Signer sessions a server remembers at most (only signers with a valid signature make one)."""
START_SKEW_MS = 2_000
"""A request signed more than this before the server started is refused: its nonce memory starts empty at every
start (a ``kill -9`` included), so a request captured before a restart must not pass as new."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class StrictMode(StrEnum):
    """``aclStrictSignatures``: whose requests must carry a strict signature."""

    OFF = "off"
    ADMIN = "admin"
    ALL = "all"

    def required(self, admin: bool) -> bool:
        """True when a request of an account (``admin`` or not) must be strictly signed."""
        return self is StrictMode.ALL or (self is StrictMode.ADMIN and admin)


def _item(data: bytes) -> bytes:
    return _LEN.pack(len(data)) + data


def strict_content(code: int, fields: Mapping[str, str]) -> bytes:
    """The header part of the strict content: the tag, the code, and the fields but the signatures, by name."""
    parts = [_item(TAG), _item(str(int(code)).encode())]
    for name in sorted(k for k in fields if k not in _SKIP):
        parts.append(_item(name.encode()))
        parts.append(_item(str(fields[name]).encode()))
    return b"".join(parts)


def strict_signature(mac: hmac.HMAC, code: int, fields: Mapping[str, str], body: bytes) -> str:
    """The strict signature with a prepared HMAC-SHA256 of the secret key (copied, so ``mac`` serves again)."""
    m = mac.copy()
    m.update(strict_content(code, fields))
    m.update(_LEN.pack(len(body)))
    if body:
        m.update(body)
    return base64.b64encode(m.digest()).decode()


def parse_nonce(text: str) -> tuple[str, int] | None:
    """``(session, seq)`` of a ``SignNonce``, None when it is not of that form."""
    m = _NONCE_RE.match(text)
    return (m.group(1), int(m.group(2))) if m else None


class StrictSigner:
    """Adds ``SignedAt``, ``SignNonce`` and ``StrictSignature`` to a request's fields (one session per signer)."""

    __slots__ = ("_mac", "_seq", "session")

    def __init__(self, secret_key: str) -> None:
        self._mac = hmac.new(secret_key.encode(), digestmod="sha256")
        self.session = secrets.token_urlsafe(18)
        self._seq = 0

    def __call__(self, code: int, fields: dict[str, str], body: bytes, now_ms: int) -> None:
        """Sign ``fields`` in place (a retry is signed anew, with the next sequence number)."""
        self._seq += 1
        fields.pop(STRICT_SIGNATURE, None)
        fields[SIGNED_AT] = str(now_ms)
        fields[NONCE] = f"{self.session}.{self._seq}"
        fields[STRICT_SIGNATURE] = strict_signature(self._mac, code, fields, body)


@dataclass(slots=True)
class _Session:
    top: int
    """The highest sequence number seen."""
    seen: int
    """Bit i set: sequence number ``top - i`` was seen (i < WINDOW_BITS)."""
    last_ms: int


class ReplayGuard:
    """The nonces a server has seen, per (account, session): bounded, forgetting only what the window refuses."""

    def __init__(self, window_ms: int, max_sessions: int = MAX_SESSIONS, bits: int = WINDOW_BITS) -> None:
        self.window_ms = window_ms
        self.max_sessions = max_sessions
        self.bits = bits
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def _forget_old(self, now_ms: int) -> None:
        # a session last used before now - 2 windows signed nothing the time check would still accept
        horizon = now_ms - 2 * self.window_ms
        sessions = self._sessions
        while sessions:
            key, s = next(iter(sessions.items()))
            if s.last_ms >= horizon:
                break
            del sessions[key]

    def admit(self, account: str, session: str, seq: int, now_ms: int) -> str | None:
        """Note the nonce ``(session, seq)`` of ``account``: None when it is new, else why it is refused."""
        key = (account, session)
        s = self._sessions.get(key)
        if s is None:
            self._forget_old(now_ms)
            if len(self._sessions) >= self.max_sessions:
                return (f"the server remembers {self.max_sessions} signer sessions already (within twice the "
                        "signature window); try again later")  # fmt: skip
            self._sessions[key] = _Session(seq, 1, now_ms)
            return None
        if seq > s.top:
            shift = seq - s.top
            s.seen = ((s.seen << shift) | 1) & ((1 << self.bits) - 1) if shift < self.bits else 1
            s.top = seq
        else:
            back = s.top - seq
            if back >= self.bits:
                return f"its nonce is older than the last {self.bits} of its signer's session (a replay, or held back)"
            if s.seen >> back & 1:
                return "its nonce was used before: the request is a replay"
            s.seen |= 1 << back
        s.last_ms = now_ms
        self._sessions.move_to_end(key)
        return None


@dataclass
class StrictPolicy:
    """A server's rules for strict signatures: who needs one (``mode``), the time window, and its nonce memory."""

    mode: StrictMode = StrictMode.OFF
    window_ms: int = 300_000
    guard: ReplayGuard | None = None
    started_ms: int = field(default_factory=_now_ms)
    """When this server started remembering nonces."""

    def __post_init__(self) -> None:
        if self.guard is None:
            self.guard = ReplayGuard(self.window_ms)

    def check(
        self, account: str, mac: hmac.HMAC, code: int, fields: Mapping[str, str], body: bytes, now_ms: int
    ) -> tuple[Reason, str] | None:
        """Verify a request's strict signature (``mac``: the account's HMAC-SHA256); None when it holds and its
        nonce is new (the nonce is then remembered), else the reason and a remark."""
        given = fields.get(STRICT_SIGNATURE, "")
        at = fields.get(SIGNED_AT, "")
        nonce = parse_nonce(fields.get(NONCE, ""))
        if not at.isascii() or not at.isdigit() or len(at) > 16 or nonce is None:
            why = f"the strict signature needs {SIGNED_AT} (milliseconds) and {NONCE} (session.seq)"
            return Reason.ACL_SIGNATURE, why
        skew = abs(now_ms - int(at))
        if skew > self.window_ms:
            return Reason.ACL_SIGNATURE_EXPIRED, (
                f"signed {skew / 1000:.0f} s away from this server's clock (more than {self.window_ms / 1000:g} s): "
                "check the clocks, and sign each request when it is sent"
            )
        if int(at) < self.started_ms - START_SKEW_MS:
            return Reason.ACL_SIGNATURE_EXPIRED, (
                "signed before this server started, so it cannot tell a replay: sign each request when it is sent "
                "(and check the clocks)"
            )
        expected = strict_signature(mac, code, fields, body)
        if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
            why = "the strict signature does not match (wrong secret key, or the request was changed after signing)"
            return Reason.ACL_SIGNATURE, why
        assert self.guard is not None
        replay = self.guard.admit(account, nonce[0], nonce[1], now_ms)
        return (Reason.ACL_REPLAYED, replay) if replay is not None else None


def strict_policy(mode: str, window_s: int) -> StrictPolicy:
    """The policy of a server's ``aclStrictSignatures`` and ``aclSignatureWindowSeconds``."""
    return StrictPolicy(StrictMode(mode), window_s * 1000)
