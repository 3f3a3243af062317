"""Authentication and authorization of a request under ACL 2.0 (docs/acl2.md §2, §5, §6).

In order, for a request of code ``c`` from address ``ip``:

1. authentication (``authenticationEnabled``, ``c`` not in ``authenticationWhitelist``): an ``AccessKey`` (else
   ``ACL_NO_CREDENTIALS``) naming a user (``ACL_UNKNOWN_ACCOUNT``) that is enabled (``ACL_USER_DISABLED``), and a
   signature made with its password: RocketMQ's HMAC-SHA1 (``acl/signature.py``), and sievemq's strict signature when
   present or required by ``aclStrictSignatures`` (``ACL_SIGNATURE``, ``ACL_SIGNATURE_EXPIRED``, ``ACL_REPLAYED``,
   ``ACL_STRICT_REQUIRED``);
2. authorization (``authorizationEnabled``, ``c`` not in ``authorizationWhitelist``): the user named by
   ``AccessKey`` exists and is enabled; a super user may do everything; otherwise ``c``'s rule
   (``classification.py``): any user, a super user only, or each resource the request names judged by the user's
   policies (``matching.py``) with one of the actions ``c`` needs (``NO_PERMISSION``).

Refusals are code 16 (NO_PERMISSION) with the ``reason`` extField and a remark naming the user, the resource and
the deciding entry, never a secret. Pure but for the strict signatures' nonce memory.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from sievemq.acl.decision import Refusal
from sievemq.acl.permission import Perm
from sievemq.acl.signature import ACCESS_KEY, signature_matches
from sievemq.acl.strict import NONCE, SIGNED_AT, STRICT_SIGNATURE, StrictPolicy
from sievemq.auth.classification import Kind, Need, rule_of
from sievemq.auth.matching import refusal
from sievemq.auth.model import Action, Resource, User
from sievemq.auth.store import AuthStore
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode, request_name
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note

__all__ = ["USER_DISABLED", "AuthGate", "GateSettings"]

log = logging.getLogger(__name__)

USER_DISABLED = Reason.ACL_USER_DISABLED
LOG_INTERVAL = 10.0


@dataclass(frozen=True)
class GateSettings:
    """The ACL 2.0 settings the gate applies."""

    authentication: bool
    authorization: bool
    cluster: str
    authentication_whitelist: frozenset[int] = frozenset()
    authorization_whitelist: frozenset[int] = frozenset()


def _what(code: int) -> str:
    name = request_name(code)
    return f"{name} ({code})"


class _Macs:
    """Each user's keyed HMACs, prepared once per password."""

    def __init__(self) -> None:
        self._macs: dict[str, tuple[str, hmac.HMAC, hmac.HMAC]] = {}

    def get(self, user: User) -> tuple[hmac.HMAC, hmac.HMAC]:
        got = self._macs.get(user.username)
        if got is None or got[0] != user.password:
            key = user.password.encode()
            got = (user.password, hmac.new(key, digestmod="sha1"), hmac.new(key, digestmod="sha256"))
            if len(self._macs) > 20_000:
                self._macs.clear()
            self._macs[user.username] = got
        return got[1], got[2]


def _user(store: AuthStore, fields: Mapping[str, str], code: int) -> User | Refusal:
    name = fields.get(ACCESS_KEY)
    if not name:
        return Refusal(Reason.ACL_NO_CREDENTIALS, f"ACL 2.0: {_what(code)} carries no AccessKey; sign requests as a "
                       "user of this broker")  # fmt: skip
    user = store.user(name)
    if user is None:
        return Refusal(Reason.ACL_UNKNOWN_ACCOUNT, f"ACL 2.0: no user is named {name!r}")
    if not user.enabled:
        return Refusal(USER_DISABLED, f"ACL 2.0: the user {name!r} is disabled")
    return user


def authenticate(
    store: AuthStore, macs: _Macs, strict: StrictPolicy, code: int, fields: Mapping[str, str], body: bytes,
    now_ms: int,
) -> User | Refusal:  # fmt: skip
    """Step 1: the request's user, its signature checked."""
    user = _user(store, fields, code)
    if isinstance(user, Refusal):
        return user
    sha1, sha256 = macs.get(user)
    who = f"{_what(code)} of user {user.username!r}"
    if STRICT_SIGNATURE in fields:
        problem = strict.check(user.username, sha256, code, fields, body, now_ms)
        return Refusal(problem[0], f"ACL 2.0: {who}: {problem[1]}") if problem is not None else user
    if SIGNED_AT in fields or NONCE in fields:
        return Refusal(Reason.ACL_SIGNATURE, f"ACL 2.0: {who} carries {SIGNED_AT}/{NONCE} but no {STRICT_SIGNATURE}")
    if strict.mode.required(user.is_super):
        return Refusal(Reason.ACL_STRICT_REQUIRED, f"ACL 2.0: {who} carries a plain signature, and this broker "
                       f"requires strict ones (aclStrictSignatures = {strict.mode})")  # fmt: skip
    if not signature_matches(sha1, fields, body):
        return Refusal(Reason.ACL_SIGNATURE, f"ACL 2.0: the signature of {who} does not match (wrong password, or "
                       "the request was changed after signing)")  # fmt: skip
    return user


def authorize_needs(store: AuthStore, user: User, needs: list[Need], ip: str, what: str) -> Refusal | None:
    """None when ``user`` may have every (resource, actions) of ``needs`` from ``ip`` (``matching.refusal``)."""
    return refusal(user, store.acl(user.username), needs, ip, what)


def authorize(
    store: AuthStore, settings: GateSettings, user: User | None, ip: str, code: int, fields: Mapping[str, str],
    body: bytes,
) -> Refusal | None:  # fmt: skip
    """Step 2 (``user``: the authenticated user, None when authentication did not run)."""
    if user is None:
        found = _user(store, fields, code)
        if isinstance(found, Refusal):
            return found
        user = found
    if user.is_super:
        return None
    rule = rule_of(code)
    if rule.kind is Kind.SIGNED:
        return None
    if rule.kind is Kind.SUPER:
        return Refusal(Reason.NO_PERMISSION, f"ACL 2.0: {_what(code)} needs a super user; User:{user.username} is "
                       "a Normal user")  # fmt: skip
    assert rule.needs is not None
    return authorize_needs(store, user, rule.needs(fields, body, settings.cluster), ip, _what(code))


def decide(
    store: AuthStore, settings: GateSettings, macs: _Macs, strict: StrictPolicy, ip: str, code: int,
    fields: Mapping[str, str], body: bytes, now_ms: int,
) -> Refusal | None:  # fmt: skip
    """None when the request may be served, else why not (the module docstring's order)."""
    user: User | None = None
    if settings.authentication and code not in settings.authentication_whitelist:
        found = authenticate(store, macs, strict, code, fields, body, now_ms)
        if isinstance(found, Refusal):
            return found
        user = found
    if settings.authorization and code not in settings.authorization_whitelist:
        return authorize(store, settings, user, ip, code, fields, body)
    return None


def needs_of_perms(resources: Mapping[str, int]) -> list[Need]:
    """The plain ACL's ``{topic or %RETRY%group: Perm}`` (what processors find once they read a record) as needs."""
    out: list[Need] = []
    for name, perm in resources.items():
        actions = {Action.PUB} if perm & Perm.PUB else set()
        if perm & Perm.SUB:
            actions.add(Action.SUB)
        if perm & Perm.ANY:
            actions |= {Action.PUB, Action.SUB}
        out.append((Resource.topic(name), frozenset(actions or {Action.SUB})))
    return out


class AuthGate:
    """The broker's ``ProcessorTable`` authorizer under ACL 2.0."""

    def __init__(self, store: AuthStore, settings: GateSettings, strict: StrictPolicy | None = None) -> None:
        self.store = store
        self.settings = settings
        self.strict = strict if strict is not None else StrictPolicy()
        self._macs = _Macs()
        self.refused: Counter[str] = Counter()
        self._log = RateLimitedLog(LOG_INTERVAL)

    def __call__(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Raise the refusal of a request that may not be served."""
        ip = conn.peer[0]
        refusal = decide(self.store, self.settings, self._macs, self.strict, ip, cmd.code, cmd.ext_fields, cmd.body,
                         time.time_ns() // 1_000_000)  # fmt: skip
        if refusal is not None:
            self._refuse(ip, refusal)

    def screen(self, peer: str, cmd: RemotingCommand) -> None:
        """The header screen of a large frame (docs/server-limits.md §4): with authentication on, its body is read
        only when its ``AccessKey`` names an enabled user (or its code is whitelisted); else the refusal."""
        if not self.settings.authentication or cmd.code in self.settings.authentication_whitelist:
            return
        user = _user(self.store, cmd.ext_fields, cmd.code)
        if isinstance(user, Refusal):
            raise RemotingError(ResponseCode.NO_PERMISSION, user.remark, user.reason)

    def check_more(self, conn: Connection, cmd: RemotingCommand, resources: dict[str, int]) -> None:
        """Raise the refusal when the admitted request's user lacks ``resources`` (found once the processor read the
        record the request names)."""
        if not self.settings.authorization or cmd.code in self.settings.authorization_whitelist:
            return
        ip = conn.peer[0]
        user = _user(self.store, cmd.ext_fields, cmd.code)
        refusal = user if isinstance(user, Refusal) else authorize_needs(
            self.store, user, needs_of_perms(resources), ip, "the record it names")  # fmt: skip
        if refusal is not None:
            self._refuse(ip, refusal)

    def _refuse(self, ip: str, refusal: Refusal) -> None:
        self.refused[refusal.reason] += 1
        held_back = self._log.allow((ip, refusal.remark))
        if held_back is not None:
            log.warning("broker refused a request from %s: [%s] %s%s", ip, refusal.reason, refusal.remark,
                        suppressed_note(held_back))  # fmt: skip
        raise RemotingError(ResponseCode.NO_PERMISSION, refusal.remark, refusal.reason)
