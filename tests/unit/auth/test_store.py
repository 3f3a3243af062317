"""The users and ACLs on disk (auth.json): a round trip, a torn file, invalid files refused, the initial users and
the migration of plain_acl.yml accounts."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.acl.loader import parse_text
from sievemq.auth.bootstrap import initial_user, inner_credentials, prepare_store
from sievemq.auth.migrate import migrate
from sievemq.auth.model import (
    Acl,
    Action,
    AuthError,
    Decision,
    PolicyEntry,
    PolicyType,
    User,
    UserStatus,
    UserType,
    parse_resource,
)
from sievemq.auth.store import AuthFileError, AuthStore, auth_path, document, parse_document
from sievemq.auth.wire import acl_info, parse_acl_info
from sievemq.errors import ConfigError

ACL_BODY = orjson.dumps({"subject": "User:alice", "policies": [{"entries": [
    {"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"},
    {"resource": "Group:*", "actions": ["Sub"], "sourceIps": ["127.0.0.1"], "decision": "Allow"}]}]})  # fmt: skip


async def test_a_round_trip_through_the_file(tmp_path: Path) -> None:
    store = AuthStore(auth_path(tmp_path))
    await store.create_user(User("alice", "secret-1"))
    await store.create_user(User("root", "secret-2", UserType.SUPER))
    name, policies = parse_acl_info(ACL_BODY, None)
    await store.merge_acl(name, policies)
    with pytest.raises(AuthError, match="exists"):
        await store.create_user(User("alice", "x"))
    with pytest.raises(AuthError, match="does not exist"):
        await store.merge_acl("bob", policies)
    await store.update_user("alice", None, None, UserStatus.DISABLE)
    again = AuthStore(auth_path(tmp_path))
    again.load()
    assert dict(again.users) == dict(store.users)
    assert again.users["alice"] == User("alice", "secret-1", UserType.NORMAL, UserStatus.DISABLE)
    assert acl_info(again.acls["alice"]) == acl_info(store.acls["alice"])
    await store.delete_acl("alice", PolicyType.CUSTOM, parse_resource("Topic:orders"))
    assert [e.resource.key for e in store.acls["alice"].custom] == ["Group:*"]
    assert await store.delete_user("alice") and "alice" not in store.acls
    assert not await store.delete_user("alice")
    again.load()
    assert set(again.users) == {"root"} and not again.acls


async def test_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    async def failing(path: Path, doc: object) -> None:
        raise OSError("disk full")

    store = AuthStore(auth_path(tmp_path), failing)
    with pytest.raises(OSError):
        await store.create_user(User("alice", "pw"))
    assert not store.users


def test_a_torn_file_falls_back_to_its_previous_version(tmp_path: Path) -> None:
    path = auth_path(tmp_path)
    store = AuthStore(path)
    store.replace_now({"a": User("a", "pw")}, {})
    store.replace_now({"a": User("a", "pw"), "b": User("b", "pw")}, {})
    path.write_bytes(b'{"version": 1, "users": [{"userna')  # a crash in the middle of a write, without rename
    store.load()
    assert set(store.users) == {"a"}


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"version": 2}, "version 1"),
        ({"version": 1, "users": [{"username": "a:b", "password": "x"}]}, "username"),
        ({"version": 1, "users": [{"username": "a", "password": ""}]}, "password"),
        ({"version": 1, "users": [{"username": "a", "password": "x"}, {"username": "a", "password": "y"}]}, "twice"),
        ({"version": 1, "acls": [orjson.loads(ACL_BODY)]}, "not a user"),
    ],
)
def test_an_invalid_file_is_refused_naming_the_problem(tmp_path: Path, doc: object, problem: str) -> None:
    path = auth_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(AuthFileError, match=problem):
        AuthStore(path).load()


PLAIN = parse_text(
    """
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
    topicPerms: [topicA=DENY, topicB=PUB|SUB]
    groupPerms: [groupA=SUB]
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
  - accessKey: "bad:key"
    secretKey: "12345678"
""",
    "test",
)


def test_plain_accounts_become_users_and_policies() -> None:
    existing = {"rocketmq2": User("rocketmq2", "other-password")}
    users, acls, notes = migrate(PLAIN, existing, {})
    assert users["RocketMQ"] == User("RocketMQ", "12345678", UserType.NORMAL)
    assert users["rocketmq2"].password == "other-password"  # an existing user is left as it is
    assert any("bad:key" in n for n in notes)
    custom = {e.resource.key: (sorted(a.value for a in e.actions), e.decision) for e in acls["RocketMQ"].custom}
    assert custom == {"Topic:topicA": (["All"], Decision.DENY), "Topic:topicB": (["Pub", "Sub"], Decision.ALLOW),
                      "Group:groupA": (["Sub"], Decision.ALLOW)}  # fmt: skip
    assert [(e.resource.key, e.actions) for e in acls["RocketMQ"].default] == [("Topic:*", frozenset([Action.PUB]))]
    users, _, _ = migrate(PLAIN, {}, {})
    assert users["rocketmq2"].user_type is UserType.SUPER


def test_initial_users_and_migration_are_written_once(tmp_path: Path) -> None:
    store = AuthStore(auth_path(tmp_path))
    init = initial_user('{"username": "admin", "password": "admin-pw"}')
    inner = inner_credentials('{"accessKey": "broker", "secretKey": "broker-pw"}')
    assert init is not None and inner is not None and init.is_super and inner.is_super
    prepare_store(store, [init, inner], PLAIN)
    assert {"admin", "broker", "RocketMQ", "rocketmq2"} <= set(store.users)
    mtime = auth_path(tmp_path).stat().st_mtime_ns
    prepare_store(store, [User("admin", "changed", UserType.SUPER)], PLAIN)  # nothing new: the file stays
    assert auth_path(tmp_path).stat().st_mtime_ns == mtime and store.users["admin"].password == "admin-pw"
    assert initial_user("") is None
    for bad in ("{", '{"username": "a"}', "[1]"):
        with pytest.raises(ConfigError):
            initial_user(bad)


NAME = st.text("abcdefgh0123_.-", min_size=1, max_size=12)
ENTRY = st.builds(
    PolicyEntry,
    st.builds(lambda k, n, p: parse_resource(f"{k}:{n}{'*' if p else ''}"),
              st.sampled_from(["Topic", "Group", "Cluster"]), st.text("abcXY01_-", min_size=1, max_size=8),
              st.booleans()) | st.just(parse_resource("*")),
    st.frozensets(st.sampled_from(list(Action)), min_size=1),
    st.sampled_from(list(Decision)),
    st.lists(st.sampled_from(["10.0.0.0/8", "127.0.0.1", "2001:db8::/32"]), max_size=2, unique=True).map(tuple),
)  # fmt: skip


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(NAME, st.tuples(st.text(min_size=1, max_size=20).filter(lambda p: p.isprintable()),
                                       st.sampled_from(list(UserType)), st.sampled_from(list(UserStatus)),
                                       st.lists(ENTRY, max_size=4), st.lists(ENTRY, max_size=3)), max_size=5))
def test_any_state_reads_back_from_its_document(state: dict[str, tuple]) -> None:  # type: ignore[type-arg]
    users = {n: User(n, p, t, s) for n, (p, t, s, _, _) in state.items()}
    acls = {}
    for n, (_, _, _, custom, default) in state.items():
        acl = Acl(n).merged(PolicyType.CUSTOM, custom).merged(PolicyType.DEFAULT, default)
        if not acl.empty:
            acls[n] = acl
    back_users, back_acls = parse_document(orjson.loads(orjson.dumps(document(users, acls))), "test")
    assert back_users == users
    assert {n: acl_info(a) for n, a in back_acls.items()} == {n: acl_info(a) for n, a in acls.items()}
