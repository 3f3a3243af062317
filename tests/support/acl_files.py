"""``plain_acl.yml`` texts the tests write: an admin account and an ordinary one that may use every topic."""

from __future__ import annotations

ADMIN = ("adminAK1", "adminSK1-secret")
USER = ("userAK01", "userSK01-secret")


def open_acl(user: tuple[str, str] = USER, admin: tuple[str, str] = ADMIN, group_perm: str | None = "SUB") -> str:
    """An ACL file where ``user`` has PUB|SUB on every topic (and ``group_perm`` on every group) and ``admin`` is an
    admin account."""
    groups = f"\n    defaultGroupPerm: {group_perm}" if group_perm else ""
    return f"""
accounts:
  - accessKey: {user[0]}
    secretKey: {user[1]}
    defaultTopicPerm: PUB|SUB{groups}
  - accessKey: {admin[0]}
    secretKey: {admin[1]}
    admin: true
"""
