"""The dashboard's logins, their pure parts (docs/dashboard.md §5): the users file's rules, the token checks, the
failures limited per address with bounded memory, what a user who may not read contents gets, and when logins are
on; and the users file ``sievemq dev`` makes (mode 0600, the hash only)."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.dashboard.auth import Authenticator
from sievemq.dashboard.config import DashboardConfig
from sievemq.dashboard.errors import ApiError
from sievemq.dashboard.lockout import FailureLimiter, peer_key
from sievemq.dashboard.users import (
    TOKEN_MAX,
    Role,
    User,
    UsersFileError,
    bearer_token,
    hash_token,
    new_token,
    parse_users_text,
    user_entry,
)
from sievemq.dashboard.users_file import UsersFile, create_users_file, load_users
from sievemq.dashboard.views import with_content

ADMIN, VIEWER, READER = new_token(), new_token(), new_token()
FILE = (user_entry("ops", hash_token(ADMIN), Role.ADMIN) + user_entry("support", hash_token(VIEWER), Role.VIEWER)
        + user_entry("audit", hash_token(READER), Role.VIEWER, read_bodies=True))  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------------------------------------ tokens
def test_tokens_are_random_and_stored_as_their_sha256() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(t) >= 43 for t in tokens)
    t = next(iter(tokens))
    assert hash_token(t) == "sha256:" + hashlib.sha256(t.encode()).hexdigest()
    assert t not in hash_token(t)


def test_the_users_file_finds_each_user_by_token_and_no_one_else() -> None:
    users = parse_users_text(FILE, "users.toml")
    assert len(users) == 3
    assert users.find(ADMIN) == User("ops", Role.ADMIN, True)
    assert users.find(VIEWER) == User("support", Role.VIEWER, False)
    assert users.find(READER) == User("audit", Role.VIEWER, True)
    for wrong in ("", ADMIN[:-1], ADMIN + "x", ADMIN.upper(), hash_token(ADMIN), hash_token(ADMIN)[7:]):
        assert users.find(wrong) is None, wrong


@given(st.text(max_size=80))
def test_no_text_but_a_users_token_finds_a_user(token: str) -> None:
    users = parse_users_text(FILE, "users.toml")
    assert users.find(token) is None


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.DEF-_~+/123==", "abc.DEF-_~+/123=="),
        ("bearer   tok", "tok"),
        ("  Bearer tok  ", "tok"),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Bearer a b", None),
        ("Bearer tok\x00", None),
        ("Bearer t\u00e9", None),
        ("Bearer =abc", None),
        ("Token abc", None),
        ("Bearer " + "a" * TOKEN_MAX, "a" * TOKEN_MAX),
        ("Bearer " + "a" * (TOKEN_MAX + 1), None),
    ],
)
def test_bearer_header(header: str, token: str | None) -> None:
    assert bearer_token(header) == token


BAD_FILES = [
    ("[[users]]\nname = 'x'\n", "tokenHash"),
    ("[[users]]\nname = 'x'\ntokenHash = 'secret-token'\nrole = 'admin'\n", "tokenHash"),
    ("[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "A" * 64 + "'\nrole = 'admin'\n", "tokenHash"),
    ("[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'root'\n", "role"),
    (
        "[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'viewer'\nreadBodies = 'yes'\n",
        "readBodies",
    ),
    (
        "[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'admin'\nreadBodies = false\n",
        "readBodies is for viewers",
    ),
    ("[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'admin'\npassword = 'p'\n", "password"),
    ("[[users]]\nname = 'a b'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'admin'\n", "name"),
    ("[[users]]\nname = ''\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'admin'\n", "name"),
    (
        "[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'admin'\n"
        "[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "b" * 64 + "'\nrole = 'viewer'\n",
        "named twice",
    ),
    (
        "[[users]]\nname = 'x'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'admin'\n"
        "[[users]]\nname = 'y'\ntokenHash = 'sha256:" + "a" * 64 + "'\nrole = 'viewer'\n",
        "another user's token",
    ),
    ("users = 'everyone'\n", "list"),
    ("admins = []\n", "admins"),
    ("[[users\n", "not valid TOML"),
]


@pytest.mark.parametrize(("text", "named"), BAD_FILES, ids=[n for _, n in BAD_FILES])
def test_a_bad_users_file_is_refused_naming_what_is_wrong(text: str, named: str) -> None:
    with pytest.raises(UsersFileError, match=r"users\.toml") as e:
        parse_users_text(text, "users.toml")
    assert named in str(e.value)


def test_snake_case_keys_and_an_empty_file() -> None:
    text = f"[[users]]\nname = 'x'\ntoken_hash = '{hash_token('t')}'\nrole = 'viewer'\nread_bodies = true\n"
    assert parse_users_text(text, "f").find("t") == User("x", Role.VIEWER, True)
    assert len(parse_users_text("", "f")) == 0


def test_an_entry_cannot_inject_toml() -> None:
    with pytest.raises(ValueError):
        user_entry('x"\nrole = "admin', hash_token("t"), Role.VIEWER)


# ------------------------------------------------------------------------------------------------ files
def test_the_file_dev_makes_holds_the_hash_only_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "dashboard-users.toml"
    token = create_users_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert token not in text and hash_token(token) in text
    assert load_users(path).find(token) == User("admin", Role.ADMIN, True)
    with pytest.raises(FileExistsError):
        create_users_file(path)


def test_the_users_file_is_reloaded_and_a_bad_edit_keeps_the_last_good_users(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    path.write_text(user_entry("a", hash_token(ADMIN), Role.ADMIN))
    users = UsersFile(path, check_interval=0)
    assert users.current().find(ADMIN) is not None
    path.write_text(user_entry("b", hash_token(VIEWER), Role.VIEWER))  # ADMIN revoked
    assert users.current().find(ADMIN) is None and users.current().find(VIEWER) is not None
    path.write_text("[[users]]\nname = 'broken'\n")
    assert users.current().find(VIEWER) is not None
    with pytest.raises(UsersFileError, match="larger than"):
        big = tmp_path / "big.toml"
        big.write_bytes(b"#" * (1024 * 1024 + 1))
        load_users(big)
    with pytest.raises(UsersFileError, match="does not exist"):
        load_users(tmp_path / "missing.toml")


# ------------------------------------------------------------------------------------------------ lockout
def test_an_address_waits_after_its_failures_until_its_window_ends() -> None:
    clock = Clock()
    limiter = FailureLimiter(3, 60.0, clock=clock)
    assert limiter.wait("a") == 0
    assert [limiter.failed("a") for _ in range(3)] == [False, False, True]
    assert limiter.wait("a") == 60.0 and limiter.wait("b") == 0
    clock.now += 59.5
    assert limiter.wait("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.wait("a") == 0 and len(limiter) == 0
    assert limiter.failed("a") is False and limiter.wait("a") == 0


def test_the_limiter_tracks_a_bounded_number_of_addresses_and_never_blocks_the_innocent() -> None:
    clock = Clock()
    limiter = FailureLimiter(2, 60.0, max_peers=100, clock=clock)
    limiter.failed("victim-neighbour")
    limiter.failed("attacker")
    limiter.failed("attacker")
    for i in range(10_000):  # one failure from each of many addresses
        limiter.failed(f"10.{i // 256}.{i % 256}.1")
        assert len(limiter) <= 100
    assert limiter.wait("innocent") == 0
    clock.now += 61
    limiter.failed("x")
    assert len(limiter) == 1, "ended windows are forgotten"


@pytest.mark.parametrize(
    ("ip", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        (None, "(unknown)"),
        ("not-an-ip", "not-an-ip"),
    ],
)
def test_peer_keys(ip: str | None, key: str) -> None:
    assert peer_key(ip) == key


def test_the_authenticator_refuses_with_the_reasons_and_holds_back_a_guessing_address() -> None:
    users = parse_users_text(FILE, "f")
    auth = Authenticator(lambda: users, FailureLimiter(3))

    def refusal(header: str | None, peer: str = "192.0.2.1") -> ApiError:
        with pytest.raises(ApiError) as e:
            auth.user(header, peer)
        return e.value

    assert auth.user(f"Bearer {VIEWER}", "192.0.2.1").name == "support"
    for _ in range(5):
        none = refusal(None)
        assert (none.status, none.reason) == (401, "AUTH_REQUIRED"), "asking without a token is no failure"
        assert none.headers["WWW-Authenticate"].startswith("Bearer ")
    for header in (f"Bearer {ADMIN}x", "Basic b3BzOnBhc3M=", "Bearer " + "a" * 10_000):
        bad = refusal(header)
        assert (bad.status, bad.reason) == (401, "AUTH_FAILED")
        assert 'error="invalid_token"' in bad.headers["WWW-Authenticate"]
    held = refusal(f"Bearer {ADMIN}")  # the right token is not even looked at now
    assert (held.status, held.reason) == (429, "AUTH_RATE_LIMITED") and int(held.headers["Retry-After"]) > 0
    assert auth.user(f"Bearer {ADMIN}", "192.0.2.2").name == "ops", "another address is not held back"


# ------------------------------------------------------------------------------------------------ what is shown
def test_a_user_who_may_not_read_contents_gets_messages_without_them() -> None:
    m = {"topic": "t", "msgId": "AB", "keys": ["k"], "tags": "T", "bodySize": 5, "body": "hello",
         "bodyEncoding": "utf-8", "properties": {"KEYS": "k", "card": "4111"},
         "userProperties": {"card": "4111"}}  # fmt: skip
    answer = {"messages": [m], "records": [m], "message": m, "errors": {}}
    hidden = with_content(answer, False)
    for shown in (hidden["messages"][0], hidden["records"][0], hidden["message"]):
        assert shown["contentHidden"] is True
        assert shown["body"] is shown["properties"] is shown["userProperties"] is shown["bodyEncoding"] is None
        assert (shown["keys"], shown["tags"], shown["bodySize"]) == (["k"], "T", 5)
    assert "4111" not in repr(hidden) and "hello" not in repr(hidden)
    full = with_content(answer, True)
    assert full["message"] == {**m, "contentHidden": False}
    assert answer["message"] is m and "contentHidden" not in m, "the answer given is not changed"


@pytest.mark.parametrize(
    ("enable", "access_key", "acl", "on"),
    [
        ("auto", "", False, False),
        ("auto", "dashAdmin", False, True),
        ("auto", "", True, True),
        ("false", "dashAdmin", True, False),
        ("true", "", False, True),
    ],
)
def test_when_logins_are_on(enable: str, access_key: str, acl: bool, on: bool) -> None:
    assert DashboardConfig(auth_enable=enable, access_key=access_key).auth_on(acl) is on  # type: ignore[arg-type]


@pytest.mark.parametrize(("host", "logins", "warned"), [("0.0.0.0", False, True), ("", False, True),
                                                        ("10.0.0.5", False, True), ("127.0.0.1", False, False),
                                                        ("::1", False, False), ("0.0.0.0", True, False)])  # fmt: skip
def test_a_dashboard_open_to_others_without_logins_warns(
    host: str, logins: bool, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from sievemq.admin.api import AdminClient
    from sievemq.dashboard.app import dashboard_routes
    from sievemq.dashboard.service import DashboardData

    auth = Authenticator(lambda: parse_users_text(FILE, "f"), FailureLimiter(3)) if logins else None
    with caplog.at_level("WARNING", logger="sievemq.dashboard.app"):
        dashboard_routes(DashboardData(AdminClient("127.0.0.1:1")), host, auth)
    assert any("without logins" in r.getMessage() for r in caplog.records) is warned


def test_a_users_file_that_cannot_be_written_leaves_nothing_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while sievemq dev makes its users file: a clear error, and no half-written file that would stop
    the next start."""
    import errno
    import os

    from sievemq.dashboard.users_file import create_users_file

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    path = tmp_path / "dashboard-users.toml"
    with pytest.raises(UsersFileError, match="No space left on device"):
        create_users_file(path)
    assert not path.exists()
