"""``plain_acl.yml`` accounts as ACL 2.0 users and policies: RocketMQ's ``AuthMigrator`` (docs/acl2.md §7). Pure.

Each account becomes a user of the same name and password, Super when it is ``admin``; its ``topicPerms`` and
``groupPerms`` become CUSTOM entries (``PUB`` -> Pub, ``SUB`` -> Sub, ``PUB|SUB`` -> Pub and Sub, ``DENY`` -> All
denied), its ``defaultTopicPerm``/``defaultGroupPerm`` DEFAULT entries on ``Topic:*``/``Group:*`` (a default of
DENY adds nothing: no matching entry is a denial too). A user that exists already is left as it is, as RocketMQ
does; an account whose access key is no valid username is skipped with a note. Trusted addresses
(``globalWhiteRemoteAddresses``, ``whiteRemoteAddress``) are not carried over: ACL 2.0 has none.
"""

from __future__ import annotations

from collections.abc import Mapping

from sievemq.acl.model import Account, AclRules
from sievemq.acl.permission import Perm
from sievemq.auth.model import (
    Acl,
    Action,
    AuthError,
    Decision,
    Pattern,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourceType,
    User,
    UserType,
    parse_password,
    parse_resource,
    parse_username,
)
from sievemq.protocol.names import group_of_retry_topic

__all__ = ["migrate", "perm_entry"]


def perm_entry(resource: Resource, perm: int) -> PolicyEntry:
    """The entry of a plain permission on ``resource``."""
    if perm & Perm.DENY or not perm & (Perm.PUB | Perm.SUB):
        return PolicyEntry(resource, frozenset([Action.ALL]), Decision.DENY)
    actions = {a for a, bit in ((Action.PUB, Perm.PUB), (Action.SUB, Perm.SUB)) if perm & bit}
    return PolicyEntry(resource, frozenset(actions), Decision.ALLOW)


def _acl(account: Account, name: str, notes: list[str]) -> Acl:
    custom: list[PolicyEntry] = []
    for key, perm in account.perms.items():
        group = group_of_retry_topic(key)
        text = f"Group:{group}" if group is not None else f"Topic:{key}"
        try:
            custom.append(perm_entry(parse_resource(text), perm))
        except AuthError as e:
            notes.append(f"account {name!r}: {text} not migrated: {e}")
    default = [
        perm_entry(Resource(rtype, "", Pattern.ANY), perm)
        for rtype, perm in ((ResourceType.TOPIC, account.default_topic_perm),
                            (ResourceType.GROUP, account.default_group_perm))
        if perm & (Perm.PUB | Perm.SUB) and not perm & Perm.DENY
    ]  # fmt: skip
    acl = Acl(name)
    if custom:
        acl = acl.merged(PolicyType.CUSTOM, custom)
    if default:
        acl = acl.merged(PolicyType.DEFAULT, default)
    return acl


def migrate(
    rules: AclRules, users: Mapping[str, User], acls: Mapping[str, Acl]
) -> tuple[dict[str, User], dict[str, Acl], list[str]]:
    """``users`` and ``acls`` with the accounts of ``rules`` added (existing users untouched), and notes for the
    log (what was migrated or skipped)."""
    new_users, new_acls, notes = dict(users), dict(acls), []
    for key, account in rules.accounts.items():
        try:
            name = parse_username(key)
            password = parse_password(account.secret_key, name)
        except AuthError as e:
            notes.append(f"account not migrated: {e}")
            continue
        if name in new_users:
            continue
        new_users[name] = User(name, password, UserType.SUPER if account.admin else UserType.NORMAL)
        acl = _acl(account, name, notes)
        if not acl.empty:
            new_acls[name] = acl
        notes.append(f"plain ACL account {name!r} migrated ({'Super' if account.admin else 'Normal'} user, "
                     f"{len(acl.custom) + len(acl.default)} policy entries)")  # fmt: skip
    return new_users, new_acls, notes
