"""Access control of 5.x clients at the proxy (docs/proxy.md §9): who is calling, and may they.

A 5.x client with credentials sends, with every call, the metadata ``x-mq-date-time`` (``20261202T141500Z``) and
``authorization``: ``MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>``, the
hex HMAC-SHA1 of the date-time keyed with the secret key (the Python client writes it in lower case, the Node.js
client in upper case). The proxy checks it against the accounts of a ``plain_acl.yml`` (the brokers' format and
rules: ``docs/protocol/acl.md``), then decides what the call needs exactly as a broker decides the 4.x request it
stands for (``needs_of``: a send is SEND_MESSAGE of its topic, a receive POP_MESSAGE of topic and group, ...), with
the same ``authorize``. The brokers then see the proxy's own account (``aclAccessKey``).

Pure: ``check`` gets the rules, the peer address, the call's metadata, its method name and request.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sievemq.acl.addresses import parse_ip
from sievemq.acl.classification import BROKER
from sievemq.acl.decision import Refusal, authorize
from sievemq.acl.model import AclRules
from sievemq.protocol.reasons import Reason
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.remoting.codes import RequestCode as C

__all__ = ["Credentials", "check", "date_problem", "needs_of", "parse_authorization", "peer_ip", "settings_needs"]

SCHEME = "MQv2-HMAC-SHA1"
DATE_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a call's ``authorization`` metadata claims."""

    access_key: str
    signature: str


def parse_authorization(value: str) -> Credentials | None:
    """The access key and signature of an ``authorization`` value (None: not the 5.x clients' form)."""
    scheme, _, rest = value.strip().partition(" ")
    if scheme != SCHEME:
        return None
    parts: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, val = item.strip().partition("=")
        if sep:
            parts[key] = val
    access_key, signature = parts.get("Credential", ""), parts.get("Signature", "")
    if not access_key or not signature or parts.get("SignedHeaders") != "x-mq-date-time":
        return None
    return Credentials(access_key, signature)


def date_problem(text: str, now: datetime, max_skew_s: int) -> str | None:
    """What is wrong with a call's ``x-mq-date-time`` (not a date-time; further than ``max_skew_s`` from ``now``)."""
    try:
        when = datetime.strptime(text, DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return f"x-mq-date-time {text[:32]!r} is not a date-time of the form 20261202T141500Z"
    if max_skew_s and abs((now - when).total_seconds()) > max_skew_s:
        return f"x-mq-date-time {text} is more than {max_skew_s} s from the proxy's clock"
    return None


def _signed(secret_mac: hmac.HMAC, date_time: str) -> str:
    m = secret_mac.copy()
    m.update(date_time.encode())
    return m.hexdigest()


def needs_of(method: str, request: Any) -> list[tuple[int, dict[str, str]]]:
    """The 4.x requests a call stands for, as (code, header fields) a broker's policy decides (empty: the call needs
    an authenticated account and nothing more)."""
    if method == "SendMessage":
        return [(C.SEND_MESSAGE, {"topic": m.topic.name}) for m in request.messages]
    if method == "EndTransaction":
        return [(C.SEND_MESSAGE, {"topic": request.topic.name})]
    if method in ("ReceiveMessage", "QueryAssignment"):
        topic = request.message_queue.topic.name if method == "ReceiveMessage" else request.topic.name
        return [(C.POP_MESSAGE, {"topic": topic, "consumerGroup": request.group.name})]
    if method == "AckMessage":
        return [(C.ACK_MESSAGE, {"extraInfo": e.receipt_handle, "consumerGroup": request.group.name})
                for e in request.entries]  # fmt: skip
    if method in ("ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue"):
        return [(C.ACK_MESSAGE, {"extraInfo": request.receipt_handle, "consumerGroup": request.group.name})]
    if method == "Heartbeat" and request.group.name:
        return [(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": request.group.name})]
    return []


def settings_needs(settings: pb.Settings) -> list[tuple[int, dict[str, str]]]:
    """A Telemetry settings command: a consumer registers its group's subscriptions (SUB on the group and each
    topic, as a 4.x heartbeat needs); a producer names its topics (PUB on each)."""
    if settings.HasField("subscription"):
        group = settings.subscription.group.name
        return [(C.POP_MESSAGE, {"topic": e.topic.name, "consumerGroup": group})
                for e in settings.subscription.subscriptions]  # fmt: skip
    if settings.HasField("publishing"):
        return [(C.SEND_MESSAGE, {"topic": t.name}) for t in settings.publishing.topics]
    return []


def check(
    rules: AclRules,
    peer: str,
    metadata: Mapping[str, str],
    needs: Iterable[tuple[int, dict[str, str]]],
    now: datetime,
    max_skew_s: int,
) -> Refusal | None:
    """None when the caller may make the call, else why not (the order of a broker's checks: the global white
    list, credentials, the account's white list, the signature, then each need)."""
    ip = parse_ip(peer) if peer else None
    if ip is not None and any(p.match(ip) for p in rules.global_white):
        return None
    creds = parse_authorization(metadata.get("authorization", ""))
    if creds is None:
        return Refusal(Reason.ACL_NO_CREDENTIALS, "ACL: the call carries no MQv2-HMAC-SHA1 authorization; give the "
                       "client the credentials of an account of the proxy's ACL file")  # fmt: skip
    account = rules.accounts.get(creds.access_key)
    if account is None:
        return Refusal(Reason.ACL_UNKNOWN_ACCOUNT, f"ACL: no account has the access key {creds.access_key[:64]!r}")
    if account.white.text and ip is not None and account.white.match(ip):
        return None  # as at a broker: the account's own addresses need no signature and no permission
    date_time = metadata.get("x-mq-date-time", "")
    problem = date_problem(date_time, now, max_skew_s)
    if problem is not None:
        return Refusal(Reason.ACL_SIGNATURE, f"ACL: {problem}")
    given = creds.signature.lower().encode()
    if not hmac.compare_digest(_signed(account.mac, date_time).encode(), given):
        return Refusal(Reason.ACL_SIGNATURE, f"ACL: the signature does not match account {creds.access_key!r} "
                       "(wrong secret key)")  # fmt: skip
    for code, fields in needs:
        refusal = authorize(account, BROKER, code, fields, b"")
        if refusal is not None:
            return refusal
    return None


def peer_ip(peer: str) -> str:
    """The address of gRPC's peer text (``ipv4:10.0.0.1:5000``, ``ipv6:[::1]:5000``; "" for others)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""
