"""The pure parts of the name server's controller codes (``sievemq.namesrv.etcd_controller``): reading a set's keys,
the bodies and headers in RocketMQ's shapes (BrokerReplicasInfo, ElectMasterResponseHeader and body,
GetMetaDataResponseHeader), and the electMaster decisions. End to end with mqadmin: tests/failover/
test_mqadmin_controller.py."""

from __future__ import annotations

import orjson
import pytest

from sievemq.errors import RemotingError
from sievemq.ha.set_state import ReplicaInfo, SetState
from sievemq.namesrv.etcd_controller import (
    MAX_BROKER_NAMES,
    Refusal,
    SetRecord,
    elect_body,
    elect_header,
    elect_refusal,
    handover_outcome,
    metadata_header,
    parse_broker_names,
    parse_sets,
    replicas_info,
)
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode

STATE = SetState(1, "10.0.0.1:10911", "10.0.0.1:10912", 3, frozenset({1, 2}), 5, ((1, 0), (3, 4096)))


def info(bid: int) -> ReplicaInfo:
    return ReplicaInfo(bid, f"10.0.0.{bid}:10911", f"10.0.0.{bid}:10912", 3, 100)


def record(
    state: SetState | None = STATE, alive: tuple[int, ...] = (1, 2, 3), handover: int | None = None
) -> SetRecord:
    raw = orjson.dumps({"brokerId": handover, "requestedAt": 1}) if handover is not None else None
    return SetRecord("C", "broker-a", state, 7, {b: info(b) for b in alive}, raw)


def test_a_sets_keys_are_read_by_cluster_and_broker_name_and_what_is_not_sievemqs_is_left_out() -> None:
    rows = [
        (b"/root/C/broker-a/state", STATE.to_json(), 42),
        (b"/root/C/broker-a/brokers/2", info(2).to_json(), 43),
        (b"/root/C/broker-a/handover", b'{"brokerId": 2, "requestedAt": 5}', 44),
        (b"/root/C/broker-a/brokers/3", b"not json", 45),
        (b"/root/D/broker-a/brokers/1", info(1).to_json(), 46),
        (b"/root/C/stray", b"x", 47),
        (b"/other/C/broker-b/state", STATE.to_json(), 48),
    ]
    sets = parse_sets("/root/", rows)
    assert set(sets) == {("C", "broker-a"), ("D", "broker-a")}
    a = sets[("C", "broker-a")]
    assert (a.state, a.revision, set(a.alive), a.handover_target) == (STATE, 42, {2}, 2)
    d = sets[("D", "broker-a")]
    assert (d.state, d.revision, set(d.alive), d.handover) == (None, 0, {1}, None)


@pytest.mark.parametrize("raw", [b"{", b"[]", b'{"brokerId": 0}', b'{"brokerId": true}', b'{"brokerId": "2"}'])
def test_a_handover_request_that_does_not_name_a_broker_names_none(raw: bytes) -> None:
    rec = SetRecord("C", "b", STATE, 1, {}, raw)
    assert rec.handover_target is None


def test_the_sync_state_request_body_is_a_list_of_broker_names() -> None:
    assert parse_broker_names(b'["broker-a", "broker-b", "broker-a"]') == ["broker-a", "broker-b"]
    assert parse_broker_names(b"[]") == []
    for bad in (b"", b"{", b'{"broker-a": 1}', b'["a", 1]', orjson.dumps(["b"] * (MAX_BROKER_NAMES + 1))):
        with pytest.raises(RemotingError) as e:
            parse_broker_names(bad)
        assert e.value.reason == Reason.INVALID_HEADER, bad


def test_replicas_info_lists_live_brokers_and_the_sync_state_set_as_rocketmqs_controller_does() -> None:
    # broker 2 (in sync) is gone, broker 3 (not in sync) is alive; the master's address comes from the state
    got = replicas_info("broker-a", STATE, {1: info(1), 3: info(3)})
    assert got == {
        "masterBrokerId": 1,
        "masterAddress": "10.0.0.1:10911",
        "masterEpoch": 3,
        "syncStateSetEpoch": 5,
        "inSyncReplicas": [
            {"brokerName": "broker-a", "brokerId": 1, "brokerAddress": "10.0.0.1:10911", "alive": True},
            {"brokerName": "broker-a", "brokerId": 2, "brokerAddress": "", "alive": False},
        ],
        "notInSyncReplicas": [
            {"brokerName": "broker-a", "brokerId": 3, "brokerAddress": "10.0.0.3:10911", "alive": True},
        ],
    }
    dead_master = replicas_info("broker-a", STATE, {})
    assert dead_master["inSyncReplicas"][0] == {"brokerName": "broker-a", "brokerId": 1,
                                                "brokerAddress": "10.0.0.1:10911", "alive": False}  # fmt: skip


def test_headers_carry_rocketmqs_field_names_as_strings() -> None:
    assert metadata_header("/sievemq", "10.0.0.9:9876") == {
        "group": "/sievemq", "controllerLeaderId": "10.0.0.9:9876", "controllerLeaderAddress": "10.0.0.9:9876",
        "isLeader": "true", "peers": ""}  # fmt: skip
    assert elect_header(STATE) == {"masterBrokerId": "1", "masterAddress": "10.0.0.1:10911", "masterEpoch": "3",
                                   "syncStateSetEpoch": "5"}  # fmt: skip


def test_the_elect_body_is_an_elect_master_response_body_and_a_broker_member_group() -> None:
    new = SetState(2, "10.0.0.2:10911", "10.0.0.2:10912", 4, frozenset({2}), 6, ((1, 0), (3, 4096), (4, 9000)))
    body = elect_body("C", "broker-a", new, {2: info(2), 3: info(3)})
    group = {"cluster": "C", "brokerName": "broker-a", "brokerAddrs": {"2": "10.0.0.2:10911", "3": "10.0.0.3:10911"}}
    assert body == {"brokerMemberGroup": group, "syncStateSet": [2], **group}


def reason(r: Refusal | SetState | None) -> tuple[int, Reason] | None:
    return (r.code, r.reason) if isinstance(r, Refusal) else None


FAILED = ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


@pytest.mark.parametrize(
    ("rec", "target", "expected"),
    [
        (record(state=None), 2, (ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, Reason.SET_NOT_FOUND)),
        (record(), 1, (ResponseCode.CONTROLLER_MASTER_STILL_EXIST, Reason.ALREADY_MASTER)),
        (record(alive=(2, 3)), 1, (FAILED, Reason.HANDOVER_TARGET_NOT_ALIVE)),  # the master itself, gone
        (record(), 4, (FAILED, Reason.HANDOVER_TARGET_NOT_ALIVE)),
        (record(), 3, (FAILED, Reason.HANDOVER_TARGET_NOT_IN_SYNC)),
        (record(alive=(2, 3)), 2, (FAILED, Reason.HANDOVER_NO_LIVE_MASTER)),
        (record(handover=3), 2, (FAILED, Reason.HANDOVER_PENDING)),
        (record(handover=2), 2, None),  # the same request pending: wait with it
        (record(), 2, None),
    ],
)
def test_elect_master_refuses_what_the_master_cannot_do(rec: SetRecord, target: int, expected: object) -> None:
    assert reason(elect_refusal(rec, target)) == expected


def test_a_handover_is_done_once_the_state_names_the_target_in_a_higher_epoch() -> None:
    new = SetState(2, "10.0.0.2:10911", "", 4, frozenset({2}), 6, ((1, 0), (3, 4096), (4, 9000)))
    other = SetState(3, "10.0.0.3:10911", "", 4, frozenset({3}), 6, ((1, 0), (3, 4096), (4, 9000)))
    assert handover_outcome(STATE, 2, record(handover=2)) is None  # still waiting
    assert handover_outcome(STATE, 2, record(state=STATE.with_set(frozenset({1})), handover=2)) is None
    assert handover_outcome(STATE, 2, record(state=new)) == new
    assert reason(handover_outcome(STATE, 2, record(state=other))) == (FAILED, Reason.HANDOVER_OVERTAKEN)
    assert reason(handover_outcome(STATE, 2, record())) == (FAILED, Reason.HANDOVER_REFUSED)  # withdrawn
    assert reason(handover_outcome(STATE, 2, record(handover=3))) == (FAILED, Reason.HANDOVER_REFUSED)
    gone = handover_outcome(STATE, 2, record(state=None))
    assert reason(gone) == (ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, Reason.SET_NOT_FOUND)
