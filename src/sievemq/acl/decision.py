"""The decision: may this request be served? (docs/protocol/acl.md §3, RocketMQ's order of checks).

1. a peer address in ``globalWhiteRemoteAddresses``: yes, nothing else is checked;
2. no ``AccessKey`` (or an empty one): no; an access key no account has: no;
3. a peer address in the account's ``whiteRemoteAddress``: yes, without signature or permissions;
4. a strict signature (``strict.py``) that does not verify, is outside the time window or repeats a nonce: no; a
   plain one where the server requires strict ones, a missing or wrong ``Signature``, or an admin request carrying
   a field its code does not know: no;
5. a send of message traces (PUB on ``RMQ_SYS_TRACE_TOPIC``): yes;
6. an admin-only code from an account that is not ``admin``: no;
7. an admin account with no ``topicPerms``/``groupPerms``: yes; else every resource the request needs must be
   allowed by the permission listed for it, or by the account's default for topics or for groups.

Codes the role does not check (the name server's reads) skip all of it. Pure but for the nonces a
``StrictPolicy`` remembers: ``decide`` gets the rules, the peer address, the request and the time, and returns None
(served) or a ``Refusal``. ``authorize_more`` checks the resources a processor finds once it has read what the
request names (the topic of a stored record).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from sievemq.acl.addresses import IPAddress, parse_ip
from sievemq.acl.model import Account, AclRules
from sievemq.acl.permission import Perm, allows, perm_name
from sievemq.acl.policy import Policy
from sievemq.acl.resources import TRACE_TOPIC
from sievemq.acl.signature import ACCESS_KEY, signature_matches
from sievemq.acl.strict import NONCE, SIGNED_AT, STRICT_SIGNATURE, StrictPolicy
from sievemq.protocol.names import RETRY_GROUP_TOPIC_PREFIX, group_of_retry_topic
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import request_name


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: the stable ``reason`` and a remark for people (never a secret)."""

    reason: Reason
    remark: str


def describe_resource(resource: str) -> str:
    """``group G`` for ``%RETRY%G``, else ``topic T``."""
    group = group_of_retry_topic(resource)
    return f"group {group}" if group is not None else f"topic {resource}"


def _what(code: int) -> str:
    return f"{request_name(code)} ({code})"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sends a request (steps 1 to 3): its account, None from a globally trusted address; ``trusted`` when its
    address is trusted (neither signature nor permissions are checked)."""

    account: Account | None
    trusted: bool


def identify(rules: AclRules, peer: str, fields: Mapping[str, str], what: str, role: str) -> Caller | Refusal:
    """Steps 1 to 3: who sends ``what`` from ``peer``, or why nobody the ``role``'s rules know."""
    ip: IPAddress | None = None
    if rules.global_white:
        ip = parse_ip(peer)
        if any(p.match(ip) for p in rules.global_white):
            return Caller(None, True)
    access_key = fields.get(ACCESS_KEY)
    if not access_key:
        return Refusal(
            Reason.ACL_NO_CREDENTIALS,
            f"ACL: {what} carries no AccessKey; sign requests with an account of the {role}'s ACL file",
        )
    account = rules.accounts.get(access_key)
    if account is None:
        return Refusal(Reason.ACL_UNKNOWN_ACCOUNT, f"ACL: no account has the access key {access_key!r}")
    white = bool(account.white.text) and account.white.match(ip if ip is not None else parse_ip(peer))
    return Caller(account, white)


NO_STRICT = StrictPolicy()
"""Strict signatures checked when present, never required (a policy of its own for tests and tools)."""


def decide(
    rules: AclRules,
    policy: Policy,
    peer: str,
    code: int,
    fields: Mapping[str, str],
    body: bytes,
    strict: StrictPolicy = NO_STRICT,
    now_ms: int | None = None,
) -> Refusal | None:
    """None when the request may be served, else why not (see the module docstring for the order); ``now_ms``: the
    server's clock (default: now)."""
    if not policy.checks(code):
        return None
    caller = identify(rules, peer, fields, _what(code), policy.role)
    if isinstance(caller, Refusal):
        return caller
    account = caller.account
    if account is None or caller.trusted:
        return None
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    refusal = _authenticate(account, policy, code, fields, body, strict, now)
    return refusal if refusal is not None else authorize(account, policy, code, fields, body)


def _authenticate(
    account: Account, policy: Policy, code: int, fields: Mapping[str, str], body: bytes, strict: StrictPolicy,
    now_ms: int,
) -> Refusal | None:  # fmt: skip
    """Step 4: the request's signature, strict or plain."""
    access_key = account.access_key
    if STRICT_SIGNATURE in fields:
        problem = strict.check(access_key, account.strict_mac, code, fields, body, now_ms)
        if problem is not None:
            return Refusal(problem[0], f"ACL: {_what(code)} of account {access_key!r}: {problem[1]}")
        return None
    if SIGNED_AT in fields or NONCE in fields:  # its strict signature removed, its value moved into another field
        return Refusal(
            Reason.ACL_SIGNATURE,
            f"ACL: {_what(code)} of account {access_key!r} carries {SIGNED_AT}/{NONCE} but no {STRICT_SIGNATURE}",
        )
    if strict.mode.required(account.admin):
        return Refusal(
            Reason.ACL_STRICT_REQUIRED,
            f"ACL: {_what(code)} of account {access_key!r} carries a plain signature, and this {policy.role} "
            f"requires strict ones (aclStrictSignatures = {strict.mode}): sign with sievemq's clients or tools",
        )
    if not signature_matches(account.mac, fields, body):
        return Refusal(
            Reason.ACL_SIGNATURE,
            f"ACL: the signature of {_what(code)} does not match account {access_key!r} (wrong secret key, or the "
            "request was changed after signing)",
        )
    unknown = policy.unknown_fields(code, fields)
    if unknown:
        return Refusal(
            Reason.ACL_STRICT_REQUIRED,
            f"ACL: the admin request {_what(code)} carries field(s) {', '.join(map(repr, unknown[:5]))} it does not "
            "know; a plain signature does not cover field names, so such a request is accepted only strictly signed",
        )
    return None


def authorize(account: Account, policy: Policy, code: int, fields: Mapping[str, str], body: bytes) -> Refusal | None:
    """Steps 5 to 7 for an account already authenticated (its signature checked, or its credentials checked by
    another means, as the gRPC proxy does): None when ``account`` may send the request."""
    access_key = account.access_key
    needs = policy.needs(code, fields, body)
    if needs.resources.get(TRACE_TOPIC) == Perm.PUB:
        return None
    if needs.admin and not account.admin:
        return Refusal(
            Reason.NO_PERMISSION, f"ACL: {_what(code)} needs an admin account; account {access_key!r} is not an admin"
        )
    if account.admin and not account.perms:
        return None
    return _check_resources(account, needs.resources, _what(code))


def authorize_more(
    rules: AclRules, peer: str, fields: Mapping[str, str], resources: Mapping[str, int], role: str
) -> Refusal | None:
    """For a request already admitted: may its account also have ``resources`` (found by the processor, such as the
    topic of the record the request names)? Trusted addresses and accounts pass as in ``decide``."""
    caller = identify(rules, peer, fields, "the request", role)  # the file may have changed since it was admitted
    if isinstance(caller, Refusal):
        return caller
    account = caller.account
    if account is None or caller.trusted or (account.admin and not account.perms):
        return None
    return _check_resources(account, resources, "the record it names")


def _check_resources(account: Account, resources: Mapping[str, int], what: str) -> Refusal | None:
    for resource, needed in resources.items():
        is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
        owned = account.owned(resource, is_group)
        if not allows(needed, owned):
            listed = "listed" if resource in account.perms else "default"
            return Refusal(
                Reason.NO_PERMISSION,
                f"ACL: account {account.access_key!r} has no {perm_name(needed)} permission on "
                f"{describe_resource(resource)} (its {listed} permission there is {perm_name(owned)}), needed by "
                f"{what}",
            )
    return None
