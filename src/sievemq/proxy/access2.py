"""ACL 2.0 at the proxy (docs/acl2.md §9, docs/proxy.md §9): a 5.x client's call checked against the brokers' users
and policies, as RocketMQ 5's proxy checks it.

Authentication (``authenticationEnabled``): the call's ``authorization`` metadata (``MQv2-HMAC-SHA1
Credential=<username>, SignedHeaders=x-mq-date-time, Signature=<hex>``, parsed by ``access.py``) names an enabled
user, and the signature is the HMAC-SHA1 of ``x-mq-date-time`` keyed with that user's password. Authorization
(``authorizationEnabled``): a Super user may do everything; otherwise each resource the call names needs one of its
actions allowed by the user's policies (``auth/matching.py``, the broker's rules), from RocketMQ's gRPC table
(``DefaultAuthorizationContextBuilder``, ``needs_of``). With authorization alone the ``Credential`` is trusted
unsigned, as at a broker. Refusals are ``Refusal``s with the broker's reasons (the interceptor answers
UNAUTHORIZED 40100, or FORBIDDEN 40300 for ``NO_PERMISSION``).

Pure: ``check`` gets the users and ACLs (``users.py`` keeps them fresh), the peer, the metadata and the needs.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sievemq.acl.decision import Refusal
from sievemq.auth.classification import Need
from sievemq.auth.matching import refusal
from sievemq.auth.model import Acl, Action, Resource, ResourceType, User
from sievemq.protocol.reasons import Reason
from sievemq.proxy.access import date_problem, parse_authorization
from sievemq.proxy.v2 import definition_pb2 as pb

__all__ = ["Need", "Switches", "check", "needs_of", "settings_needs"]

PUB, SUB = frozenset([Action.PUB]), frozenset([Action.SUB])
PUB_SUB = frozenset([Action.PUB, Action.SUB])
CONSUMERS = frozenset([pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER])


@dataclass(frozen=True, slots=True)
class Switches:
    """Which of the two checks run (the proxy's ``authenticationEnabled`` and ``authorizationEnabled``)."""

    authentication: bool
    authorization: bool


def _topic(name: str, actions: frozenset[Action]) -> list[Need]:
    return [(Resource.topic(name), actions)] if name else []


def _send(name: str) -> list[Need]:
    """Pub on the topic (a retry topic %RETRY%G: Sub on group G, as the broker's SEND_MESSAGE)."""
    if not name:
        return []
    resource = Resource.topic(name)
    return [(resource, PUB if resource.type is ResourceType.TOPIC else SUB)]


def _group(name: str) -> list[Need]:
    return [(Resource.group(name), SUB)] if name else []


def needs_of(method: str, request: Any) -> list[Need]:
    """What a call needs: one of the actions on each resource (empty: an authenticated user is enough)."""
    if method == "SendMessage":
        return [n for m in request.messages for n in _send(m.topic.name)]
    if method in ("EndTransaction", "RecallMessage"):
        return _send(request.topic.name)
    if method == "QueryRoute":
        return _topic(request.topic.name, PUB_SUB)
    if method == "ReceiveMessage":
        return _group(request.group.name) + _topic(request.message_queue.topic.name, SUB)
    if method in ("QueryAssignment", "AckMessage", "ForwardMessageToDeadLetterQueue", "ChangeInvisibleDuration"):
        return _group(request.group.name) + _topic(request.topic.name, SUB)
    if method == "Heartbeat":
        return _group(request.group.name) if request.client_type in CONSUMERS else []
    if method == "NotifyClientTermination":
        return _group(request.group.name)
    return []


def settings_needs(settings: pb.Settings) -> list[Need]:
    """A Telemetry settings command: a producer's topics need Pub; a consumer's group and topics need Sub."""
    out: list[Need] = []
    if settings.HasField("publishing"):
        out += [n for t in settings.publishing.topics for n in _send(t.name)]
    if settings.HasField("subscription"):
        out += _group(settings.subscription.group.name)
        out += [n for e in settings.subscription.subscriptions for n in _topic(e.topic.name, SUB)]
    return out


def _user(users: Mapping[str, User], name: str) -> User | Refusal:
    if not name:
        return Refusal(Reason.ACL_NO_CREDENTIALS, "ACL 2.0: the call carries no MQv2-HMAC-SHA1 authorization; give "
                       "the client the username and password of a user of the brokers")  # fmt: skip
    user = users.get(name)
    if user is None:
        return Refusal(Reason.ACL_UNKNOWN_ACCOUNT, f"ACL 2.0: no user is named {name[:64]!r}")
    if not user.enabled:
        return Refusal(Reason.ACL_USER_DISABLED, f"ACL 2.0: the user {name!r} is disabled")
    return user


def _authenticate(
    users: Mapping[str, User], metadata: Mapping[str, str], now: datetime, max_skew_s: int
) -> User | Refusal:
    creds = parse_authorization(metadata.get("authorization", ""))
    user = _user(users, creds.access_key if creds is not None else "")
    if isinstance(user, Refusal) or creds is None:
        return user
    date_time = metadata.get("x-mq-date-time", "")
    problem = date_problem(date_time, now, max_skew_s)
    if problem is not None:
        return Refusal(Reason.ACL_SIGNATURE, f"ACL 2.0: {problem}")
    mac = hmac.new(user.password.encode(), date_time.encode(), "sha1").hexdigest()
    if not hmac.compare_digest(mac.encode(), creds.signature.lower().encode()):
        return Refusal(Reason.ACL_SIGNATURE, f"ACL 2.0: the signature of user {user.username!r} does not match "
                       "(wrong password)")  # fmt: skip
    return user


def check(
    users: Mapping[str, User],
    acls: Mapping[str, Acl],
    switches: Switches,
    peer: str,
    metadata: Mapping[str, str],
    method: str,
    needs: Iterable[Need],
    now: datetime,
    max_skew_s: int,
) -> Refusal | None:
    """None when the call may be made, else why not: authentication, then authorization (module docstring)."""
    if not (switches.authentication or switches.authorization):
        return None
    if switches.authentication:
        user = _authenticate(users, metadata, now, max_skew_s)
    else:  # authorization alone trusts the Credential's username, as a broker trusts the AccessKey
        creds = parse_authorization(metadata.get("authorization", ""))
        user = _user(users, creds.access_key if creds is not None else "")
    if isinstance(user, Refusal):
        return user
    return refusal(user, acls.get(user.username), needs, peer, method) if switches.authorization else None
