"""A slave's copy of its master's users and ACLs (auth/replica.py, docs/acl2.md §8): the master's document is taken
whole (users and entries it no longer has go), on disk, the slave's own start-up users stay, an equal document
writes nothing and a document that is not valid changes nothing."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sievemq.auth.model import User, UserType
from sievemq.auth.replica import AuthCopy
from sievemq.auth.store import AuthFileError, AuthStore, auth_path
from sievemq.auth.wire import parse_acl_info

ACL = orjson.dumps({"subject": "User:alice", "policies": [{"entries": [
    {"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"}]}]})  # fmt: skip


async def master_document(tmp_path: Path) -> dict[str, object]:
    master = AuthStore(tmp_path / "master" / "auth.json")
    await master.create_user(User("alice", "alice-pw"))
    await master.create_user(User("root", "root-pw", UserType.SUPER))
    await master.merge_acl(*parse_acl_info(ACL, None))
    return master.document()


async def test_the_masters_document_replaces_the_slaves(tmp_path: Path) -> None:
    doc = await master_document(tmp_path)
    slave = AuthStore(auth_path(tmp_path / "slave"))
    await slave.create_user(User("stale", "stale-pw"))  # a user the master does not have
    inner = User("brokerInner", "inner-pw", UserType.SUPER)
    copy = AuthCopy(slave, [inner])
    assert await copy.apply(doc, "10.0.0.1:10911")
    assert set(slave.users) == {"alice", "root", "brokerInner"}
    assert slave.acl("alice") is not None and slave.document()["acls"] == doc["acls"]
    again = AuthStore(auth_path(tmp_path / "slave"))
    again.load()  # on disk
    assert set(again.users) == {"alice", "root", "brokerInner"}
    version = slave.version
    assert not await copy.apply(doc, "10.0.0.1:10911")  # the same state: nothing written
    assert slave.version == version and copy.copies == 1


async def test_a_document_that_is_not_valid_changes_nothing(tmp_path: Path) -> None:
    slave = AuthStore(auth_path(tmp_path))
    await slave.create_user(User("alice", "alice-pw"))
    bad = {"version": 1, "users": [{"username": "alice", "password": "x"}] * 2}
    with pytest.raises(AuthFileError, match="listed twice"):
        await AuthCopy(slave).apply(bad, "10.0.0.1:10911")
    assert set(slave.users) == {"alice"} and slave.user("alice") == User("alice", "alice-pw")
