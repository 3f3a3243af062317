"""Strict signatures (``sievemq.acl.strict``) and how the decision uses them, without sockets: the signed content
byte for byte, replays, changed codes, renamed and split fields, the time window, the nonce memory's bounds, and
``aclStrictSignatures``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

import pytest

from sievemq.acl.classification import BROKER
from sievemq.acl.decision import Refusal, decide
from sievemq.acl.loader import parse_text
from sievemq.acl.signature import SIGNATURE, RequestSigner, request_content, signature_of
from sievemq.acl.strict import (
    NONCE,
    SIGNED_AT,
    STRICT_SIGNATURE,
    ReplayGuard,
    StrictMode,
    StrictPolicy,
    parse_nonce,
    strict_content,
    strict_signature,
)
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.command import RemotingCommand

RULES = parse_text(
    """
accounts:
  - accessKey: userAK01
    secretKey: userSK01-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: adminAK1
    secretKey: adminSK1-secret
    admin: true
""",
    "test",
)
USER, ADMIN = ("userAK01", "userSK01-secret"), ("adminAK1", "adminSK1-secret")
PEER = "10.0.0.7"


def item(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def test_the_content_byte_for_byte() -> None:
    fields = {"topic": "T\u00e9", "AccessKey": "ak", "Signature": "plain", STRICT_SIGNATURE: "old", "b": ""}
    expected = (item(b"sievemq-request-v2") + item(b"202") + item(b"AccessKey") + item(b"ak") + item(b"b")
                + item(b"") + item(b"topic") + item("T\u00e9".encode()))  # fmt: skip
    assert strict_content(202, fields) == expected
    mac = hmac.new(b"secret-key", digestmod="sha256")
    want = hmac.new(b"secret-key", expected + struct.pack(">I", 4) + b"body", hashlib.sha256).digest()
    assert strict_signature(mac, 202, fields, b"body") == base64.b64encode(want).decode()
    # names are items of their own: a value moved between fields changes the content
    assert strict_content(1, {"a": "bc", "d": ""}) != strict_content(1, {"a": "b", "cd": ""})


def test_nonce_form() -> None:
    assert parse_nonce("A" * 16 + ".1") == ("A" * 16, 1)
    for bad in ("short.1", "A" * 16, "A" * 16 + ".", "A" * 16 + ".-1", "A" * 65 + ".1", "A" * 16 + ".1" + "0" * 18):
        assert parse_nonce(bad) is None, bad


def signed(code: int, fields: dict[str, object], account: tuple[str, str] = USER, signer: RequestSigner | None = None,
           body: bytes = b"") -> RemotingCommand:  # fmt: skip
    cmd = RemotingCommand.request(code, fields, body)
    (signer or RequestSigner(*account))(cmd)
    return cmd


def check(cmd: RemotingCommand, policy: StrictPolicy, now_ms: int | None = None) -> Refusal | None:
    now = int(cmd.ext_fields.get(SIGNED_AT, "0")) if now_ms is None else now_ms
    return decide(RULES, BROKER, PEER, cmd.code, dict(cmd.ext_fields), cmd.body, policy, now or None)


def reason(refusal: Refusal | None) -> Reason | None:
    return None if refusal is None else refusal.reason


def test_a_strict_request_passes_once_and_its_replay_is_refused() -> None:
    policy = StrictPolicy()
    cmd = signed(C.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T", "queueId": 0})
    assert check(cmd, policy) is None
    assert reason(check(cmd, policy)) == Reason.ACL_REPLAYED
    # the plain signature of the same request verifies too: a RocketMQ broker accepts it
    assert cmd.ext_fields[SIGNATURE] == signature_of(request_content(cmd.ext_fields), USER[1])


def test_a_captured_request_cannot_become_another() -> None:
    policy = StrictPolicy()
    cmd = signed(C.GET_TOPIC_STATS_INFO, {"topic": "orders"}, ADMIN)
    as_delete = RemotingCommand.request(C.DELETE_TOPIC_IN_BROKER, dict(cmd.ext_fields))  # the 202 -> 215
    assert reason(check(as_delete, policy)) == Reason.ACL_SIGNATURE
    f = dict(cmd.ext_fields)
    f["topicz"] = ""  # an added empty field
    assert reason(check(RemotingCommand.request(cmd.code, f), policy)) == Reason.ACL_SIGNATURE
    # stripping the strict signature by moving its value into a neighbour keeps the plain one valid: refused
    f = dict(cmd.ext_fields)
    f[SIGNED_AT] = f[SIGNED_AT] + f.pop(STRICT_SIGNATURE)
    assert request_content(f) == request_content(cmd.ext_fields)
    for code in (C.GET_TOPIC_STATS_INFO, C.DELETE_TOPIC_IN_BROKER):
        assert reason(check(RemotingCommand.request(code, f), policy, int(cmd.ext_fields[SIGNED_AT]))) == \
            Reason.ACL_SIGNATURE  # fmt: skip
    # ... and renaming it away (the plain signature covers values only) leaves an unknown field on an admin code
    f = dict(cmd.ext_fields)
    f["Sz"] = f.pop(STRICT_SIGNATURE)
    f["Sigz"], f["Sigy"] = f.pop(SIGNED_AT), f.pop(NONCE)
    plain = RemotingCommand.request(C.DELETE_TOPIC_IN_BROKER, f)
    assert reason(check(plain, policy, 1)) == Reason.ACL_STRICT_REQUIRED
    assert check(RemotingCommand.request(C.DELETE_TOPIC_IN_BROKER, dict(cmd.ext_fields)), policy) is not None
    assert check(cmd, policy) is None  # the original, once


def test_the_time_window() -> None:
    policy = StrictPolicy(window_ms=300_000)
    cmd = signed(C.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T"})
    at = int(cmd.ext_fields[SIGNED_AT])
    assert reason(check(cmd, policy, at + 300_001)) == Reason.ACL_SIGNATURE_EXPIRED
    assert reason(check(cmd, policy, at - 300_001)) == Reason.ACL_SIGNATURE_EXPIRED
    assert check(cmd, policy, at + 299_000) is None


def test_out_of_order_within_the_window_then_too_old() -> None:
    policy = StrictPolicy(guard=ReplayGuard(300_000, bits=64))
    signer = RequestSigner(*USER)
    cmds = [signed(C.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T", "n": i}, signer=signer) for i in range(70)]
    assert check(cmds[1], policy) is None
    assert check(cmds[0], policy) is None  # arrived late, still new
    assert check(cmds[66], policy) is None
    assert reason(check(cmds[2], policy)) == Reason.ACL_REPLAYED  # 64 behind: cannot be told apart any more
    assert check(cmds[5], policy) is None


def test_the_nonce_memory_is_bounded_and_forgets_only_what_the_window_refuses() -> None:
    guard = ReplayGuard(window_ms=1000, max_sessions=2)
    assert guard.admit("a", "s1" * 8, 1, now_ms=0) is None
    assert guard.admit("a", "s2" * 8, 1, now_ms=10) is None
    assert guard.admit("a", "s3" * 8, 1, now_ms=20) is not None  # full: refused, nothing forgotten early
    assert guard.admit("a", "s1" * 8, 1, now_ms=1999) is not None  # still remembered within two windows
    assert guard.admit("a", "s3" * 8, 1, now_ms=2011) is None  # s1 and s2 are past two windows: forgotten
    assert len(guard) == 1


def test_strict_mode_admin_and_all() -> None:
    plain_user = signed(C.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T"}, signer=RequestSigner(*USER, strict=False))
    plain_admin = signed(C.GET_TOPIC_STATS_INFO, {"topic": "T"}, signer=RequestSigner(*ADMIN, strict=False))
    admin_policy = StrictPolicy(StrictMode.ADMIN)
    assert check(plain_user, admin_policy, 1) is None
    assert reason(check(plain_admin, admin_policy, 1)) == Reason.ACL_STRICT_REQUIRED
    assert check(signed(C.GET_TOPIC_STATS_INFO, {"topic": "T"}, ADMIN), admin_policy) is None
    assert reason(check(plain_user, StrictPolicy(StrictMode.ALL), 1)) == Reason.ACL_STRICT_REQUIRED
    assert StrictMode.OFF.required(True) is False


@pytest.mark.parametrize("field", ["topic", SIGNED_AT, NONCE])
def test_any_changed_value_fails(field: str) -> None:
    cmd = signed(C.GET_TOPIC_STATS_INFO, {"topic": "T"}, ADMIN)
    f = dict(cmd.ext_fields)
    f[field] += "1"
    assert reason(check(RemotingCommand.request(cmd.code, f), StrictPolicy(), int(cmd.ext_fields[SIGNED_AT]))) in (
        Reason.ACL_SIGNATURE, Reason.ACL_SIGNATURE_EXPIRED)  # fmt: skip


def test_a_request_signed_before_the_server_started_is_refused() -> None:
    """The nonce memory starts empty at every start (kill -9 included): a request captured before a restart is not
    taken for a new one."""
    cmd = signed(C.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T"})
    at = int(cmd.ext_fields[SIGNED_AT])
    before_restart = StrictPolicy()
    assert check(cmd, before_restart) is None
    restarted = StrictPolicy(started_ms=at + 60_000)  # a minute later, within the window
    assert reason(check(cmd, restarted, at + 61_000)) == Reason.ACL_SIGNATURE_EXPIRED
    # a client whose clock is a little behind is not refused
    assert check(signed(C.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T"}), StrictPolicy(started_ms=at + 1_000),
                 at + 1_500) is None  # fmt: skip
