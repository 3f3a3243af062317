"""The decision: may this request be served? (docs/protocol/acl.md §3, RocketMQ's order of checks).

1. a peer address in ``globalWhiteRemoteAddresses``: yes, nothing else is checked;
2. no ``AccessKey`` (or an empty one): no; an access key no account has: no;
3. a peer address in the account's ``whiteRemoteAddress``: yes, without signature or permissions;
4. a missing or wrong ``Signature``: no;
5. a send of message traces (PUB on ``RMQ_SYS_TRACE_TOPIC``): yes;
6. an admin-only code from an account that is not ``admin``: no;
7. an admin account with no ``topicPerms``/``groupPerms``: yes; else every resource the request needs must be
   allowed by the permission listed for it, or by the account's default for topics or for groups.

Codes the role does not check (the name server's reads) skip all of it. Pure: ``decide`` gets the rules, the peer
address and the request, and returns None (served) or a ``Refusal``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sievemq.acl.addresses import IPAddress, parse_ip
from sievemq.acl.model import Account, AclRules
from sievemq.acl.permission import Perm, allows, perm_name
from sievemq.acl.resources import TRACE_TOPIC, Policy
from sievemq.acl.signature import ACCESS_KEY, signature_matches
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


def decide(
    rules: AclRules, policy: Policy, peer: str, code: int, fields: Mapping[str, str], body: bytes
) -> Refusal | None:
    """None when the request may be served, else why not (see the module docstring for the order)."""
    if not policy.checks(code):
        return None
    ip: IPAddress | None = None
    if rules.global_white:
        ip = parse_ip(peer)
        if any(p.match(ip) for p in rules.global_white):
            return None
    access_key = fields.get(ACCESS_KEY)
    if not access_key:
        return Refusal(
            Reason.ACL_NO_CREDENTIALS,
            f"ACL: {_what(code)} carries no AccessKey; sign requests with an account of the {policy.role}'s ACL file",
        )
    account = rules.accounts.get(access_key)
    if account is None:
        return Refusal(Reason.ACL_UNKNOWN_ACCOUNT, f"ACL: no account has the access key {access_key!r}")
    if account.white.text and account.white.match(ip if ip is not None else parse_ip(peer)):
        return None
    if not signature_matches(account.mac, fields, body):
        return Refusal(
            Reason.ACL_SIGNATURE,
            f"ACL: the signature of {_what(code)} does not match account {access_key!r} (wrong secret key, or the "
            "request was changed after signing)",
        )
    return authorize(account, policy, code, fields, body)


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
    for resource, needed in needs.resources.items():
        is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
        owned = account.owned(resource, is_group)
        if not allows(needed, owned):
            listed = "listed" if resource in account.perms else "default"
            return Refusal(
                Reason.NO_PERMISSION,
                f"ACL: account {access_key!r} has no {perm_name(needed)} permission on {describe_resource(resource)} "
                f"(its {listed} permission there is {perm_name(owned)}), needed by {_what(code)}",
            )
    return None
