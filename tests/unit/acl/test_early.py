"""The header check of a large frame before its body is read (``acl/early.py``, no sockets)."""

from __future__ import annotations

import pytest

from sievemq.acl.early import EarlyCheck, early_refusal
from sievemq.acl.loader import parse_text
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.command import RemotingCommand

RULES = parse_text(
    """
globalWhiteRemoteAddresses: [10.10.103.*]
accounts:
  - accessKey: userAK01
    secretKey: userSK01-secret
  - accessKey: trusted1
    secretKey: trusted1-secret
    whiteRemoteAddress: 192.168.1.*
""",
    "test",
)


def test_a_known_account_or_a_globally_trusted_address_may_send_a_large_body() -> None:
    assert early_refusal(RULES, "127.0.0.1", C.SEND_MESSAGE, {"AccessKey": "userAK01"}, "broker") is None
    assert early_refusal(RULES, "10.10.103.7", C.SEND_MESSAGE, {}, "broker") is None  # globalWhiteRemoteAddresses
    assert early_refusal(RULES, "::ffff:10.10.103.7", C.SEND_MESSAGE, {}, "broker") is None
    # a wrong signature passes here: it covers the body, so it is checked once the frame is whole
    fields = {"AccessKey": "userAK01", "Signature": "not-the-right-one"}
    assert early_refusal(RULES, "127.0.0.1", C.SEND_MESSAGE, fields, "broker") is None


def test_no_or_an_unknown_access_key_is_refused_with_decides_reasons() -> None:
    none = early_refusal(RULES, "127.0.0.1", C.SEND_MESSAGE, {}, "broker")
    assert none is not None and none.reason == Reason.ACL_NO_CREDENTIALS
    assert "broker's ACL file" in none.remark
    # an account's whiteRemoteAddress trusts requests naming that account, not unsigned ones (as decide)
    white = early_refusal(RULES, "192.168.1.5", C.SEND_MESSAGE, {}, "broker")
    assert white is not None and white.reason == Reason.ACL_NO_CREDENTIALS
    unknown = early_refusal(RULES, "127.0.0.1", C.SEND_MESSAGE, {"AccessKey": "nobody00"}, "broker")
    assert unknown is not None and unknown.reason == Reason.ACL_UNKNOWN_ACCOUNT and "'nobody00'" in unknown.remark


def test_every_code_is_checked_even_those_a_role_lets_through() -> None:
    refusal = early_refusal(RULES, "127.0.0.1", C.GET_ROUTEINFO_BY_TOPIC, {}, "name server")
    assert refusal is not None and refusal.reason == Reason.ACL_NO_CREDENTIALS


def test_the_screen_raises_code_16_with_the_reason_and_follows_the_rules_in_force() -> None:
    rules = [RULES]
    check = EarlyCheck(lambda: rules[0], "broker")
    cmd = RemotingCommand.request(C.SEND_MESSAGE, {"AccessKey": "userAK01"})
    check("127.0.0.1", cmd)
    rules[0] = parse_text("accounts: []", "reloaded")  # the account was removed from the file
    with pytest.raises(RemotingError) as e:
        check("127.0.0.1", cmd)
    assert e.value.code == ResponseCode.NO_PERMISSION and e.value.reason == Reason.ACL_UNKNOWN_ACCOUNT
