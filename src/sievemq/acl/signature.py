"""Request signatures of RocketMQ's ACL: what is signed, and HMAC-SHA1 in Base64 (docs/protocol/acl.md §1).

The signed content is every extField but ``Signature``, sorted by name (as Java sorts strings: by UTF-16 code
units), their values concatenated in UTF-8, followed by the body's bytes. The client puts ``AccessKey`` (and, when
it has one, ``SecurityToken``) into extFields before signing, then adds ``Signature``. The C++ core and ali-ons also
add ``OnsChannel`` (``ALIYUN`` by default) before signing, so it is part of the content like any other field.
"""

from __future__ import annotations

import base64
import hmac
import time
from collections.abc import Collection, Mapping

from sievemq.acl.strict import StrictSigner
from sievemq.remoting.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
"""QUERY_MESSAGE's flag: RocketMQ's broker leaves it out of the content, Java clients sign it (both accepted)."""
_SKIP = frozenset((SIGNATURE,))


def _java_order(keys: list[str]) -> list[str]:
    if "".join(keys).isascii():
        return sorted(keys)
    return sorted(keys, key=lambda k: k.encode("utf-16-be"))  # UTF-16 code units, as java.lang.String compares


def signed_fields(fields: Mapping[str, str], skip: Collection[str] = _SKIP) -> bytes:
    """The header part of the signed content: the values of ``fields`` but ``skip``, in name order, in UTF-8."""
    return "".join([fields[k] for k in _java_order([k for k in fields if k not in skip])]).encode()


def request_content(fields: Mapping[str, str], body: bytes = b"", skip: Collection[str] = _SKIP) -> bytes:
    """The whole signed content (RocketMQ's ``AclUtils.combineRequestContent``)."""
    return signed_fields(fields, skip) + body


def signature_of(content: bytes, secret_key: str) -> str:
    """HMAC-SHA1 of ``content`` keyed with ``secret_key`` (UTF-8), Base64 (RocketMQ's ``AclSigner``)."""
    return base64.b64encode(hmac.new(secret_key.encode(), content, "sha1").digest()).decode()


def sign_with(mac: hmac.HMAC, fields: Mapping[str, str], body: bytes, skip: Collection[str] = _SKIP) -> str:
    """The signature with a prepared keyed HMAC (copied, so ``mac`` serves again); the body is not copied."""
    m = mac.copy()
    m.update(signed_fields(fields, skip))
    if body:
        m.update(body)
    return base64.b64encode(m.digest()).decode()


def signature_matches(mac: hmac.HMAC, fields: Mapping[str, str], body: bytes) -> bool:
    """True when the request's ``Signature`` is the one ``mac``'s secret gives (compared in constant time)."""
    given = fields.get(SIGNATURE)
    if not given:
        return False
    given_bytes = given.encode()  # compare_digest takes ASCII text only; a client may send any
    if UNIQUE_KEY_QUERY in fields:
        alt = sign_with(mac, fields, body, (SIGNATURE, UNIQUE_KEY_QUERY))
        if hmac.compare_digest(alt.encode(), given_bytes):
            return True
    return hmac.compare_digest(sign_with(mac, fields, body).encode(), given_bytes)


class RequestSigner:
    """The client's RPC hook: adds ``AccessKey`` (and ``SecurityToken``) and signs a request in place.

    With ``strict`` (the default) it first adds the strict signature (``strict.py``: the code, the fields' names, a
    time and a nonce signed), which a sievemq server checks and a RocketMQ server ignores; RocketMQ's ``Signature``
    then covers those fields too."""

    __slots__ = ("_mac", "_strict", "access_key", "security_token")

    def __init__(self, access_key: str, secret_key: str, security_token: str = "", *, strict: bool = True) -> None:
        if not access_key or not secret_key:
            raise ValueError("signing needs both an access key and a secret key")
        self.access_key = access_key
        self.security_token = security_token
        self._mac = hmac.new(secret_key.encode(), digestmod="sha1")
        self._strict = StrictSigner(secret_key) if strict else None

    def __repr__(self) -> str:
        return f"RequestSigner(access_key={self.access_key!r})"

    def __call__(self, cmd: RemotingCommand) -> None:
        fields = cmd.ext_fields
        fields[ACCESS_KEY] = self.access_key
        if self.security_token:
            fields[SECURITY_TOKEN] = self.security_token
        fields.pop(SIGNATURE, None)
        if self._strict is not None:
            self._strict(cmd.code, fields, cmd.body, time.time_ns() // 1_000_000)
        fields[SIGNATURE] = sign_with(self._mac, fields, cmd.body)
