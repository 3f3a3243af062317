"""A slave's copy of its master's users and ACLs (docs/acl2.md §8).

Each metadata round of a slave (``broker/metadata_sync.py``) asks its master for its ``auth.json`` document
(GET_ALL_AUTH_METADATA, 30023, a super user's request) and takes it as its own, on disk first (``AuthStore.replace``),
so the slave authenticates and authorizes as its master does, and goes on doing so when the master is gone. The
slave's own start-up users (``initAuthenticationUser``, ``innerClientAuthenticationCredentials``) stay when the
master's document lacks them: the slave signs its requests to the master with the one, and they would come back at
its next start anyway. Pure but for the store's write.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sievemq.auth.model import User
from sievemq.auth.store import AuthStore, parse_document

__all__ = ["AuthCopy"]

log = logging.getLogger(__name__)


class AuthCopy:
    """Takes a master's users and ACLs into a slave's ``store``, keeping the slave's own start-up ``keep`` users."""

    def __init__(self, store: AuthStore, keep: Sequence[User] = ()) -> None:
        self.store = store
        self.keep = tuple(keep)
        self.copies = 0
        """Rounds that changed the slave's users or ACLs."""

    async def apply(self, doc: Any, source: str) -> bool:
        """Take ``doc`` (the master's ``auth.json`` document, from ``source``); True when it changed ours.
        ``AuthFileError`` (nothing changed) for a document that is not valid."""
        users, acls = parse_document(doc, f"of {source}")
        for user in self.keep:
            users.setdefault(user.username, user)
        changed = await self.store.replace(users, acls)
        if changed:
            self.copies += 1
            log.info("ACL 2.0: users and ACLs copied from %s (%d users, %d ACLs)", source, len(users), len(acls))
        return changed
