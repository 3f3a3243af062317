"""Authentication and authorization of requests under ACL 2.0 (no sockets): signatures, disabled and unknown
users, super users, policies, whitelists."""

from __future__ import annotations

from pathlib import Path

import pytest

from sievemq.acl.signature import RequestSigner
from sievemq.acl.strict import StrictMode, StrictPolicy
from sievemq.auth.gate import USER_DISABLED, GateSettings, _Macs, decide, needs_of_perms
from sievemq.auth.model import Acl, PolicyType, User, UserStatus, UserType
from sievemq.auth.store import AuthStore
from sievemq.auth.wire import parse_acl_info
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.command import RemotingCommand

ON = GateSettings(True, True, "DefaultCluster")
IP = "127.0.0.1"


@pytest.fixture
def store(tmp_path: Path) -> AuthStore:
    s = AuthStore(tmp_path / "auth.json")
    body = (b'{"subject": "User:alice", "policies": [{"entries": ['
            b'{"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"},'
            b'{"resource": "Topic:ord*", "actions": ["All"], "decision": "Deny"},'
            b'{"resource": "Group:g1", "actions": ["Sub"], "sourceIps": ["127.0.0.0/8"], "decision": "Allow"}]}]}')
    name, policies = parse_acl_info(body, None)
    acl = Acl(name)
    for ptype, entries in policies:
        acl = acl.merged(ptype, entries)
    s.replace_now({"alice": User("alice", "alice-pw"), "root": User("root", "root-pw", UserType.SUPER),
                   "off": User("off", "off-pw", status=UserStatus.DISABLE)}, {"alice": acl})  # fmt: skip
    return s


def signed(code: int, fields: dict[str, str], user: str, password: str, strict: bool = False) -> RemotingCommand:
    cmd = RemotingCommand.request(code, dict(fields), body=b"")
    RequestSigner(user, password, strict=strict)(cmd)
    return cmd


def run(store: AuthStore, cmd: RemotingCommand, settings: GateSettings = ON, ip: str = IP,
        strict: StrictPolicy | None = None) -> str | None:  # fmt: skip
    refusal = decide(store, settings, _Macs(), strict or StrictPolicy(), ip, cmd.code, cmd.ext_fields, cmd.body,
                     0 if strict is None else strict.started_ms + 1)  # fmt: skip
    return None if refusal is None else str(refusal.reason)


def send(topic: str) -> dict[str, str]:
    return {"a": "P", "b": topic, "c": "TBW102", "d": "4", "e": "0"}


def test_authentication(store: AuthStore) -> None:
    assert run(store, signed(C.SEND_MESSAGE_V2, send("orders"), "alice", "alice-pw")) is None
    assert run(store, signed(C.SEND_MESSAGE_V2, send("orders"), "alice", "wrong")) == Reason.ACL_SIGNATURE
    assert run(store, signed(C.SEND_MESSAGE_V2, send("orders"), "nobody", "x")) == Reason.ACL_UNKNOWN_ACCOUNT
    assert run(store, signed(C.SEND_MESSAGE_V2, send("orders"), "off", "off-pw")) == USER_DISABLED
    assert run(store, RemotingCommand.request(C.SEND_MESSAGE_V2, send("orders"))) == Reason.ACL_NO_CREDENTIALS
    tampered = signed(C.SEND_MESSAGE_V2, send("orders"), "alice", "alice-pw")
    tampered.ext_fields["b"] = "other"
    assert run(store, tampered) == Reason.ACL_SIGNATURE


def test_strict_signatures(store: AuthStore) -> None:
    policy = StrictPolicy(StrictMode.ALL)
    cmd = signed(C.SEND_MESSAGE_V2, send("orders"), "alice", "alice-pw", strict=True)
    assert run(store, cmd, strict=policy) is None
    assert run(store, cmd, strict=policy) == Reason.ACL_REPLAYED
    plain = signed(C.SEND_MESSAGE_V2, send("orders"), "alice", "alice-pw")
    assert run(store, plain, strict=policy) == Reason.ACL_STRICT_REQUIRED


def test_authorization_by_policies(store: AuthStore) -> None:
    def alice(code: int, fields: dict[str, str], ip: str = IP) -> str | None:
        return run(store, signed(code, fields, "alice", "alice-pw"), ip=ip)

    assert alice(C.SEND_MESSAGE_V2, send("orders")) is None  # the literal entry beats the prefix Deny
    assert alice(C.SEND_MESSAGE_V2, send("orders2")) == Reason.NO_PERMISSION  # Topic:ord* Deny
    assert alice(C.SEND_MESSAGE_V2, send("x")) == Reason.NO_PERMISSION  # no entry
    pull = {"consumerGroup": "g1", "topic": "orders", "queueId": "0", "queueOffset": "0"}
    assert alice(C.PULL_MESSAGE, pull) == Reason.NO_PERMISSION  # Pub only on the topic
    assert alice(C.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "g1"}) is None
    assert alice(C.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "g1"}, "10.0.0.1") == Reason.NO_PERMISSION
    assert alice(C.GET_BROKER_RUNTIME_INFO, {}) is None  # any user
    assert alice(C.HA_CHECK, {"offset": "0", "length": "1", "crc": "0"}) == Reason.NO_PERMISSION  # super only
    assert alice(C.AUTH_LIST_USER, {}) == Reason.NO_PERMISSION  # Cluster:DefaultCluster Get
    for code, fields in ((C.HA_CHECK, {}), (C.AUTH_CREATE_USER, {"username": "x"}),
                         (C.SEND_MESSAGE_V2, send("anything"))):  # fmt: skip
        assert run(store, signed(code, fields, "root", "root-pw")) is None  # a super user may do everything


def test_settings_and_whitelists(store: AuthStore) -> None:
    unsigned = RemotingCommand.request(C.SEND_MESSAGE_V2, send("x"))
    assert run(store, unsigned, GateSettings(False, False, "c")) is None
    only_authn = GateSettings(True, False, "c")
    assert run(store, signed(C.SEND_MESSAGE_V2, send("x"), "alice", "alice-pw"), only_authn) is None
    assert run(store, unsigned, only_authn) == Reason.ACL_NO_CREDENTIALS
    white = GateSettings(True, True, "c", frozenset([C.SEND_MESSAGE_V2]), frozenset([C.SEND_MESSAGE_V2]))
    assert run(store, unsigned, white) is None
    only_authz = GateSettings(False, True, "c")
    assert run(store, unsigned, only_authz) == Reason.ACL_NO_CREDENTIALS
    unsigned.ext_fields["AccessKey"] = "alice"  # authorization alone trusts the AccessKey (RocketMQ's meaning)
    assert run(store, unsigned, only_authz) == Reason.NO_PERMISSION


def test_resources_found_after_reading() -> None:
    from sievemq.acl.permission import Perm

    got = needs_of_perms({"t": Perm.PUB, "%RETRY%g": Perm.SUB, "u": Perm.ANY})
    assert [(r.key, sorted(a.value for a in acts)) for r, acts in got] == [
        ("Topic:t", ["Pub"]), ("Group:g", ["Sub"]), ("Topic:u", ["Pub", "Sub"])]  # fmt: skip
    assert PolicyType.CUSTOM.value == "Custom"


def test_the_large_frame_screen(store: AuthStore) -> None:
    from sievemq.auth.gate import AuthGate
    from sievemq.errors import RemotingError

    gate = AuthGate(store, ON)
    gate.screen(IP, signed(C.SEND_MESSAGE_V2, send("x"), "alice", "anything"))  # the signature comes later
    for fields, reason in (({}, Reason.ACL_NO_CREDENTIALS), ({"AccessKey": "nobody"}, Reason.ACL_UNKNOWN_ACCOUNT),
                           ({"AccessKey": "off"}, USER_DISABLED)):  # fmt: skip
        with pytest.raises(RemotingError) as e:
            gate.screen(IP, RemotingCommand.request(C.SEND_MESSAGE_V2, fields))
        assert e.value.reason == reason


def test_settings_are_checked() -> None:
    from sievemq.auth.settings import parse_codes
    from sievemq.broker.config import BrokerConfig
    from sievemq.errors import ConfigError

    assert parse_codes(" 10, 34,,", "k") == frozenset([10, 34])
    with pytest.raises(ConfigError, match="authorizationWhitelist"):
        BrokerConfig(authorization_whitelist="10,SEND")
    with pytest.raises(ConfigError, match="exclude each other"):
        BrokerConfig(acl_enable=True, authentication_enabled=True)
    assert BrokerConfig(authentication_enabled=True, init_authentication_user='{"username": "a", "password": "b"}')


def test_filter_servers_are_refused_with_acl_2_authorization() -> None:
    from sievemq.broker.config import BrokerConfig
    from sievemq.errors import ConfigError

    with pytest.raises(ConfigError, match="filterServerNums"):
        BrokerConfig(authorization_enabled=True, filter_server_nums=1)
    assert BrokerConfig(authentication_enabled=True, filter_server_nums=1).filter_server_nums == 1
