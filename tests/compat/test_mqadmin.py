"""Apache RocketMQ's ``mqadmin`` (5.5.0) against RocketMQ and against sievemq: every command's output compared.

``COMMANDS`` lists every command mqadmin 5.5.0 has, with its status: ``same`` (the output is the same once what
must differ between two brokers is normalised: addresses, times, ids), ``differs`` (why: where sievemq differs on
purpose or has no such thing, and a test checks it differs only so) or ``unsupported`` (why). docs/compat.md
("mqadmin") holds the same table. Both sides are named alike (cluster ``DefaultCluster``, broker ``sv-a``:
conftest.py), so names need no normalising; the module's topics and groups start with ``adm`` (the sides are
shared with the other compatibility modules).

One JVM runs every command (``tests/compat/mqadmin.py``); the clients some commands ask about are RocketMQ's own
Java clients in that JVM (a push consumer and a producer per side, the driver's ``@push`` and ``@producer``).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from sievemq.client.api import pull_message
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from tests.compat.conftest import BROKER, CLUSTER
from tests.compat.mqadmin import STOPPED, MqAdmin, Run, kv_lines, lines, normalise
from tests.compat.sides import Side, broker_connection
from tests.support.wire import wait_routed

Status = Literal["same", "differs", "unsupported"]


@dataclass(frozen=True)
class Row:
    """A command's status against sievemq, and why when it is not ``same``."""

    status: Status
    why: str = ""


_STORE_SIZE = (
    "a stored message is one byte shorter in sievemq (its properties are stored without the trailing separator "
    "RocketMQ 5 writes), so storeSize and the commit-log offsets after the first message differ (send path)"
)
_CONTROLLER = "controller mode (DLedger controller, sync state sets, epochs): sievemq replicates its own way"
_ETCD = ("controllerMode = etcd: the name server answers from etcd (docs/failover.md); tested against a failover set "
         "with this mqadmin in tests/failover/test_mqadmin_controller.py, not here (these sides have no controller)")
_COLD = "cold-data flow control of RocketMQ's page-cache reads"
_ROCKSDB = "RocksDB stores (consume queues, configs, timers): sievemq has its own store"
_ACL2 = ("served with ACL 2.0 on (authenticationEnabled or authorizationEnabled; RocketMQ 5 serves them always), "
         "otherwise answered 3; users and policies as RocketMQ 5's (docs/acl2.md), run in test_mqadmin_auth.py")
_ACL2_COPY = ("as the ACL 2.0 commands (it reads with getUser/getAcl codes from one broker and writes with "
              "createUser/createAcl to another); not run by the tests, which have one broker")
_LITE = "lite topics (LMQ): RocketMQ 5.5's light message queues"
_CONTAINER = "broker containers (several brokers in one process)"
_STATIC = "static topics (logic queues mapped over brokers)"
_NOT_LIVE = "sievemq reads its settings at start (file, environment, flags) and changes none while running: answered 3"

COMMANDS: dict[str, Row] = {
    # topics
    "updateTopic": Row("same"),
    "updateTopicList": Row("same"),
    "deleteTopic": Row("same"),
    "updateTopicPerm": Row("same"),
    "topicRoute": Row("same"),
    "topicStatus": Row("same"),
    "topicClusterList": Row("same"),
    "topicList": Row("differs", "RocketMQ also lists its internal topics (RMQ_SYS_TRANS_HALF_TOPIC, "
                     "rmq_sys_REVIVE_LOG_<cluster>, rmq_sys_wheel_timer, BenchmarkTest, ...): sievemq keeps "
                     "transactions, POP state and timers without such topics"),
    "updateOrderConf": Row("same"),
    "allocateMQ": Row("same"),
    "updateStaticTopic": Row("unsupported", _STATIC),
    "remappingStaticTopic": Row("unsupported", _STATIC),
    # subscription groups
    "updateSubGroup": Row("same"),
    "updateSubGroupList": Row("same"),
    "deleteSubGroup": Row("same"),
    "getConsumerConfig": Row("same"),
    "setConsumeMode": Row("unsupported", "no server-side queue assignment (QUERY_ASSIGNMENT, "
                          "SET_MESSAGE_REQUEST_MODE 400-402): 4.x clients rebalance themselves, POP consumers read "
                          "every queue; answered 3"),
    # consumers and offsets
    "consumerConnection": Row("same"),
    "consumerProgress": Row("differs", "sievemq lists a topic the group subscribes before the group commits an offset "
                            "of it (docs/admin.md §3); once the group's offsets are committed the output is the same, "
                            "#Inflight (pulled, not committed yet) included"),
    "consumerStatus": Row("same"),
    "cloneGroupOffset": Row("same"),
    "resetOffsetByTime": Row("same"),
    "skipAccumulatedMessage": Row("same"),
    "startMonitoring": Row("same", "prints nothing; its monitor service runs on in the background and logs what it "
                           "finds"),
    "brokerConsumeStats": Row("same"),
    "producerConnection": Row("same"),
    "producer": Row("same"),
    # messages
    "queryMsgById": Row("same"),
    "queryMsgByKey": Row("same"),
    "queryMsgByUniqueKey": Row("same"),
    "queryMsgByOffset": Row("same"),
    "queryMsgTraceById": Row("same"),
    "printMsg": Row("differs", _STORE_SIZE),
    "printMsgByQueue": Row("differs", _STORE_SIZE),
    "consumeMessage": Row("differs", _STORE_SIZE),
    "sendMessage": Row("same"),
    "sendMsgStatus": Row("same"),
    "checkMsgSendRT": Row("same"),
    "queryCq": Row("differs", _STORE_SIZE),
    "dumpCompactionLog": Row("unsupported", "compaction topics: reads RocketMQ's compaction log files"),
    # brokers
    "brokerStatus": Row("differs", "sievemq answers the runtime entries it has a measure of under RocketMQ's names "
                        "(docs/admin.md §10) and its own (replication, event loop, disk state); it has no "
                        "thread-pool capacities, getMissTps/getTotalTps, putMessageDistributeTime, *EntireTimeMax, "
                        "putMessageFailedTimes, remainTransientStoreBufferNumbs, dispatchMaxBuffer, or RocketMQ's "
                        "timer-wheel entries (its timers: timerWaiting, timerDelivered, timerLost); "
                        "brokerVersionDesc says sievemq and its version; putLatency99/999 time the whole send"),
    "getBrokerConfig": Row("differs", "sievemq's settings, under camelCase keys (many are RocketMQ's: brokerName, "
                           "brokerClusterName, flushDiskType, ...)"),
    "updateBrokerConfig": Row("unsupported", _NOT_LIVE),
    "cleanExpiredCQ": Row("same"),
    "deleteExpiredCommitLog": Row("same"),
    "cleanUnusedTopic": Row("same"),
    "resetMasterFlushOffset": Row("unsupported", "RocketMQ's slave flush offsets; sievemq's replication is its own "
                                  "(docs/replication.md): answered 3"),
    "setCommitLogReadAheadMode": Row("unsupported", "madvise read-ahead of RocketMQ's mapped files: answered 3"),
    "switchTimerEngine": Row("unsupported", _ROCKSDB),
    "getColdDataFlowCtrInfo": Row("unsupported", _COLD),
    "updateColdDataFlowCtrGroupConfig": Row("unsupported", _COLD),
    "removeColdDataFlowCtrGroupConfig": Row("unsupported", _COLD),
    "addBroker": Row("unsupported", _CONTAINER),
    "removeBroker": Row("unsupported", _CONTAINER),
    # clusters
    "clusterList": Row("differs", "#Version is sievemq's (brokerVersionDesc); #Timer(Progress) is 0-0(0.0w, 0.0, "
                       "0.0): sievemq's timers report as timerWaiting/timerDelivered/timerLost; the rest is the same"),
    "clusterRT": Row("same"),
    # name servers
    "getNamesrvConfig": Row("differs", "sievemq's name-server settings (listenPort, orderMessageEnable are "
                            "RocketMQ's names too)"),
    "updateNamesrvConfig": Row("unsupported", _NOT_LIVE),
    "updateKvConfig": Row("same"),
    "deleteKvConfig": Row("same"),
    "wipeWritePerm": Row("differs", "the count of topics changed is the broker's: RocketMQ holds its internal "
                         "topics too"),
    "addWritePerm": Row("differs", "the count of topics changed is the broker's: RocketMQ holds its internal topics "
                        "too"),
    # statistics and exports
    "statsAll": Row("differs", "sievemq counts messages over the exact last minute, hour and day (RocketMQ samples "
                    "every 10 s, 10 min and hour), so #InTPS and #OutTPS differ; the counts (#Accumulation, "
                    "#InMsg24Hour, #OutMsg24Hour) are the same"),
    "exportMetadata": Row("same"),
    "exportConfigs": Row("differs", "the broker settings it picks that sievemq does not have (traceOn, "
                         "msgTraceTopicName, traceTopicEnable, useTLS) are missing; filterServerNums is there"),
    "exportMetrics": Row("differs", "runtimeEnv (RocketMQ's JVM settings) is empty; sizes and counts are the "
                         "broker's"),
    "exportMetadataInRocksDB": Row("unsupported", _ROCKSDB),
    "exportPopRecord": Row("unsupported", "RocketMQ's POP check-point records (POP_ROLLBACK 200056): sievemq keeps "
                           "POP state in its own files (docs/pop.md); answered 3"),
    "rocksDBConfigToJson": Row("unsupported", _ROCKSDB),
    "checkRocksdbCqWriteProgress": Row("unsupported", _ROCKSDB),
    # replication and controllers
    "haStatus": Row("unsupported", "GET_BROKER_HA_STATUS (907): sievemq's replication reports in brokerStatus "
                    "(haConnectedSlaves, haSlaveAckOffset, haState...; docs/replication.md): answered 3"),
    "getSyncStateSet": Row("differs", _ETCD),
    "getBrokerEpoch": Row("differs", _ETCD),
    "getControllerMetaData": Row("differs", _ETCD),
    "getControllerConfig": Row("unsupported", _CONTROLLER),
    "updateControllerConfig": Row("unsupported", _CONTROLLER),
    "electMaster": Row("differs", _ETCD + "; it answers once the master has handed over"),
    "cleanBrokerMetadata": Row("unsupported", _CONTROLLER),
    # ACL 2.0
    **{name: Row("differs", _ACL2) for name in (
        "createUser", "updateUser", "deleteUser", "getUser", "listUser",
        "createAcl", "updateAcl", "deleteAcl", "getAcl", "listAcl")},
    **{name: Row("differs", _ACL2_COPY) for name in ("copyUser", "copyAcl")},
    # lite topics
    **{name: Row("unsupported", _LITE) for name in (
        "getBrokerLiteInfo", "getParentTopicInfo", "getLiteTopicInfo", "getLiteClientInfo", "getLiteGroupInfo",
        "triggerLiteDispatch")},
}  # fmt: skip
"""Every command of mqadmin 5.5.0 and how sievemq answers it."""

TOPIC, TOPIC_L1, TOPIC_L2 = "admT", "admL1", "admL2"
TOPIC_RT, TOPIC_STATS = "admRT", "admS"
"""checkMsgSendRT's topic (it sends to several queues) and statsAll's (counted from its first message on)."""
GROUP, GROUP_L1, GROUP_L2 = "admG", "admGL1", "admGL2"
PRODUCER_GROUP = "admPG"
MESSAGES = 3
STATS_MESSAGES = 2
QUEUE = 1
"""The queue of TOPIC every message is sent to."""

# ---------------------------------------------------------------------------------------------------- the world


@dataclass
class SideState:
    """What was made on one side: its message ids and its clients' ids."""

    side: Side
    uniq_ids: list[str] = field(default_factory=list)
    consumer: str = ""
    producer: str = ""

    def args(self, *args: str) -> list[str]:
        """``args`` with ``{ns}`` (name server), ``{br}`` (broker address), ``{id0}`` (the first message's id),
        ``{client}`` (the push consumer's client id) filled in."""
        values = {"{ns}": self.side.namesrv, "{br}": self.side.broker,
                  "{id0}": self.uniq_ids[0] if self.uniq_ids else "", "{client}": self.consumer}  # fmt: skip
        out = []
        for a in args:
            for k, v in values.items():
                a = a.replace(k, v)
            out.append(a)
        return out


@dataclass
class World:
    """The batch JVM and both sides' state; ``setup`` keeps the runs that made it (compared by the tests)."""

    admin: MqAdmin
    ref: SideState
    ours: SideState
    tmp: Path
    setup: dict[str, tuple[Run, Run]] = field(default_factory=dict)

    def one(self, s: SideState, *args: str, timeout: float = 60.0, partial: bool = False) -> Run:
        """Run a command against one side."""
        return self.admin.run(*s.args(*args), timeout=timeout, partial=partial)

    def both(self, *args: str, timeout: float = 60.0, partial: bool = False) -> tuple[Run, Run]:
        """Run a command against RocketMQ, then against sievemq."""
        return self.one(self.ref, *args, timeout=timeout, partial=partial), self.one(
            self.ours, *args, timeout=timeout, partial=partial
        )


def _wait(what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout:.0f} s: {what}")
        time.sleep(0.5)  # polling for a state (brokers and clients reach it on their own schedules)


def _committed(s: SideState) -> bool:
    """The group's offset of the queue is the queue's end (the Java consumer commits every 5 s), asked with
    QUERY_CONSUMER_OFFSET: what the test waits for must not hang on a code it tests."""

    async def offset() -> int:
        conn = await broker_connection(s.side)
        try:
            fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": QUEUE}
            resp = await conn.request(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, fields), 30.0)
            return int(resp.ext_fields["offset"]) if resp.code == ResponseCode.SUCCESS else -1
        finally:
            conn.close()

    return asyncio.run(offset()) == MESSAGES


@pytest.fixture(scope="module")
def world(sides: tuple[Side, Side], tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Both sides hold the same topics, groups and messages, made by mqadmin itself; a Java push consumer of
    GROUP has consumed the messages and committed its offsets; a Java producer of PRODUCER_GROUP is connected."""
    tmp = tmp_path_factory.mktemp("mqadmin")
    (tmp / "topics.json").write_text(json.dumps([
        {"topicName": TOPIC_L1, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
        {"topicName": TOPIC_L2, "readQueueNums": 3, "writeQueueNums": 3, "perm": 6},
    ]))  # fmt: skip
    (tmp / "groups.json").write_text(json.dumps([{"groupName": GROUP_L1}, {"groupName": GROUP_L2, "retryMaxTimes": 3}]))
    with MqAdmin(tmp / "batch") as admin:
        w = World(admin, SideState(sides[0]), SideState(sides[1]), tmp)
        steps = {
            "updateTopic": ("updateTopic", "-n", "{ns}", "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"),
            "updateTopic RT": ("updateTopic", "-n", "{ns}", "-c", CLUSTER, "-t", TOPIC_RT),
            "updateTopic stats": ("updateTopic", "-n", "{ns}", "-b", "{br}", "-t", TOPIC_STATS, "-r", "1", "-w", "1"),
            "updateTopicList": ("updateTopicList", "-n", "{ns}", "-c", CLUSTER, "-f", str(tmp / "topics.json")),
            "updateSubGroup": ("updateSubGroup", "-n", "{ns}", "-c", CLUSTER, "-g", GROUP),
            "updateSubGroupList": ("updateSubGroupList", "-n", "{ns}", "-c", CLUSTER, "-f", str(tmp / "groups.json")),
        }
        for name, args in steps.items():
            w.setup[name] = w.both(*args)
        for side in sides:  # RocketMQ's broker tells its name server about new topics on its next beat
            asyncio.run(wait_routed(side.namesrv, (TOPIC, TOPIC_RT, TOPIC_STATS, TOPIC_L1, TOPIC_L2), who=side.name))
        # early, so that RocketMQ's 10-second sampling has counted them by the time test_stats_all... runs
        for i in range(STATS_MESSAGES):
            w.both("sendMessage", "-n", "{ns}", "-t", TOPIC_STATS, "-p", f"s{i}", "-b", BROKER, "-i", "0")
        for i in range(MESSAGES):
            runs = w.both("sendMessage", "-n", "{ns}", "-t", TOPIC, "-p", f"body{i}", "-k", f"key{i}", "-c",
                          f"tag{i % 2}", "-b", BROKER, "-i", str(QUEUE))  # fmt: skip
            w.setup.setdefault("sendMessage", runs)
            for s, run in zip((w.ref, w.ours), runs, strict=True):
                assert "SEND_OK" in run.out, run
                s.uniq_ids.append(run.out.split()[-1])
        for s in (w.ref, w.ours):
            tag = "ref" if s is w.ref else "ours"
            w.one(s, "@push", f"admC-{tag}", "{ns}", GROUP, TOPIC, "*")
            w.one(s, "@producer", f"admP-{tag}", "{ns}", PRODUCER_GROUP, TOPIC)
            s.consumer = _client_id(w, s, f"admC-{tag}")
        for s in (w.ref, w.ours):
            tag = "ref" if s is w.ref else "ours"
            consumed = w.one(s, "@consumed", f"admC-{tag}", str(MESSAGES), "90000").out.strip()
            assert consumed == str(MESSAGES), (s.side.name, consumed)
        for s in (w.ref, w.ours):
            _wait(f"{s.side.name}: {GROUP}'s offsets committed", lambda s=s: _committed(s))
        yield w
        for tag in ("ref", "ours"):
            w.admin.run("@stop", f"admC-{tag}")
            w.admin.run("@stop", f"admP-{tag}")


def _client_id(w: World, s: SideState, instance: str) -> str:
    """The client id of the JVM's client ``instance`` (``ip@instance``), as the broker lists it."""
    found = ""

    def listed() -> bool:
        nonlocal found
        out = w.one(s, "consumerConnection", "-n", "{ns}", "-g", GROUP).out
        found = next((t for t in out.split() if t.endswith("@" + instance)), "")
        return bool(found)

    _wait(f"{s.side.name}: {instance} connected", listed)
    return found


# ---------------------------------------------------------------------------------------------------- comparing

_NOISE = re.compile(r"^\s*(at |\.\.\. \d+ more|See https?://|For more information, please visit)")
_FAQ = re.compile(
    r"\s*(See (https?://\S+) for further details\.|For more information, please visit the url, (https?://\S+?)),"
)
"""RocketMQ's FAQ link inside a text: its name server puts one in its remarks, else its client adds its own."""
_COMMIT_LOG_OFFSET = re.compile(r"(?<=CommitLog Offset:)(\s+)\d+|(?<=commitLogOffset=)\d+|(?<=@)\d+(?=\s*$)")
"""A message's commit-log offset (queryMsgBy*, printMsg; the end of queryMsgByKey's #IndexKey): where it lies in
the log depends on everything stored before, like an id."""


def text(run: Run, *numbers: str, keep: Callable[[str], bool] | None = None, sort: bool = False) -> str:
    """A run's output and error text with what legitimately differs replaced (``normalise``; ``numbers``: more
    patterns of numbers that depend on the moment), stack frames and FAQ links dropped; ``keep``: only the lines it
    accepts; ``sort``: lines sorted (outputs in Java hash order of names that differ)."""
    err = "\n".join(ln for ln in run.err.splitlines() if not _NOISE.match(ln))
    err = re.sub(r" BROKER: \S+", "", err)
    raw = [
        _COMMIT_LOG_OFFSET.sub(r"\1N", _FAQ.sub(" FAQ,", ln)) for ln in run.out.splitlines() if keep is None or keep(ln)
    ]
    out_lines = lines(normalise("\n".join(raw), numbers=numbers))
    if sort:
        out_lines = sorted(out_lines)
    return "\n".join(out_lines) + f"\n--- exit {run.exit}\n" + normalise(err, numbers=numbers)


def assert_same(runs: tuple[Run, Run], *numbers: str, keep: Callable[[str], bool] | None = None,
                sort: bool = False) -> None:  # fmt: skip
    """Both sides printed the same, normalised."""
    theirs, ours = (text(r, *numbers, keep=keep, sort=sort) for r in runs)
    assert ours == theirs, f"RocketMQ:\n{theirs}\n\nsievemq:\n{ours}"


_RATE = r"\d+\.\d+"
_INT = r"\d+"


def _mine(line: str) -> bool:
    return "adm" in line or line.startswith("#")


def _not_retry(line: str) -> bool:
    """Not a row of the group's retry topic: RocketMQ lists it once the consumer commits an offset of it (after its
    first long poll of the empty queue ends, 15 s or more), sievemq from the start (its subscription)."""
    return not line.startswith("%RETRY%")


# ---------------------------------------------------------------------------------------------------- the table


def test_the_table_lists_every_command_of_mqadmin(world: World) -> None:
    """COMMANDS holds exactly the commands ``mqadmin`` 5.5.0 lists."""
    out = world.admin.run().out
    listed = {m.group(1) for m in re.finditer(r"^ {3}(\w+)\s", out, re.MULTILINE)}
    assert len(listed) > 90, out
    assert set(COMMANDS) == listed


def test_docs_hold_the_table() -> None:
    """docs/compat.md's mqadmin table has a row per command with the same status."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "compat.md").read_text()
    section = doc[doc.index("## mqadmin") :]
    for name, row in COMMANDS.items():
        m = re.search(rf"^\| `{name}` \| (\w[\w ]*?) \|", section, re.MULTILINE)
        assert m is not None, f"docs/compat.md lists no {name}"
        assert m.group(1).replace("not supported", "unsupported") == row.status, name


# ---------------------------------------------------------------------------------------------------- same

Case = tuple[str, tuple[str, ...], dict[str, object]]

SAME: list[Case] = [
    ("topicRoute", ("-t", TOPIC), {}),
    ("topicStatus", ("-t", TOPIC), {}),
    ("topicStatus", ("-t", TOPIC_L2), {}),
    ("topicClusterList", ("-t", TOPIC), {}),
    ("updateTopicPerm", ("-c", CLUSTER, "-t", TOPIC_L2, "-p", "4"), {}),
    ("updateOrderConf", ("-t", TOPIC, "-v", f"{BROKER}:4", "-m", "put"), {}),
    ("updateOrderConf", ("-t", TOPIC, "-m", "get"), {}),
    ("updateOrderConf", ("-t", TOPIC, "-m", "delete"), {}),
    ("allocateMQ", ("-t", TOPIC, "-i", "127.0.0.1@1,127.0.0.1@2"), {}),
    ("getConsumerConfig", ("-g", GROUP_L2), {}),
    ("deleteSubGroup", ("-c", CLUSTER, "-g", GROUP_L1, "-r", "true"), {}),
    ("getConsumerConfig", ("-g", GROUP_L1), {}),
    ("consumerConnection", ("-g", GROUP), {}),
    ("consumerProgress", ("-g", GROUP), {"numbers": (_RATE,), "keep": _not_retry}),
    ("consumerProgress", (), {"keep": _mine, "numbers": (_RATE,)}),
    ("consumerStatus", ("-g", GROUP), {}),
    ("brokerConsumeStats", ("-b", "{br}"), {"keep": _mine}),
    ("producerConnection", ("-g", PRODUCER_GROUP, "-t", TOPIC), {}),
    ("producer", ("-b", "{br}"), {"keep": lambda ln: "@adm" in ln, "sort": True}),
    ("cloneGroupOffset", ("-s", GROUP, "-d", GROUP_L2, "-t", TOPIC), {}),
    ("resetOffsetByTime", ("-g", GROUP_L2, "-t", TOPIC, "-s", "0"), {}),
    ("skipAccumulatedMessage", ("-g", GROUP_L2, "-t", TOPIC), {}),
    ("consumerProgress", ("-g", GROUP_L2), {}),
    ("queryMsgByKey", ("-t", TOPIC, "-k", "key0"), {}),
    ("queryMsgByUniqueKey", ("-t", TOPIC, "-i", "{id0}"), {}),
    ("queryMsgById", ("-t", TOPIC, "-i", "{id0}"), {}),
    (
        "queryMsgById",
        ("-t", TOPIC, "-i", "{id0}", "-g", GROUP, "-d", "{client}"),
        {"numbers": (r"spentTimeMills=\d+",)},
    ),
    ("queryMsgByOffset", ("-t", TOPIC, "-b", BROKER, "-i", str(QUEUE), "-o", "0"), {}),
    ("queryMsgTraceById", ("-i", "{id0}"), {}),
    ("sendMsgStatus", ("-b", BROKER, "-s", "64", "-c", "2"), {"numbers": (r"rt=\d+ms", r"queueOffset=\d+")}),
    ("checkMsgSendRT", ("-t", TOPIC_RT, "-a", "2", "-s", "16"), {"numbers": (_INT, _RATE)}),
    ("cleanExpiredCQ", ("-b", "{br}"), {}),
    ("cleanUnusedTopic", ("-b", "{br}"), {}),
    ("deleteExpiredCommitLog", ("-b", "{br}"), {}),
    ("updateKvConfig", ("-s", "admNS", "-k", "k1", "-v", "v1"), {}),
    ("deleteKvConfig", ("-s", "admNS", "-k", "k1"), {}),
    ("deleteTopic", ("-c", CLUSTER, "-t", TOPIC_L1), {}),
    ("topicRoute", ("-t", TOPIC_L1), {}),
]
"""Commands whose output is the same on both sides, in the order they run (some change what the next see)."""


@pytest.mark.parametrize("made", ["updateTopic", "updateTopic RT", "updateTopic stats", "updateTopicList",
                                  "updateSubGroup", "updateSubGroupList", "sendMessage"])  # fmt: skip
def test_what_made_the_world_printed_the_same(world: World, made: str) -> None:
    assert_same(world.setup[made])


@pytest.mark.parametrize(("name", "args", "how"), SAME, ids=[f"{i:02d}-{c[0]}" for i, c in enumerate(SAME)])
def test_same(world: World, name: str, args: tuple[str, ...], how: dict[str, object]) -> None:
    assert COMMANDS[name].status in ("same", "differs")
    runs = world.both(name, "-n", "{ns}", *args)
    assert_same(runs, *how.get("numbers", ()), keep=how.get("keep"), sort=bool(how.get("sort")))  # type: ignore[arg-type]


def test_cluster_rt_prints_the_same_rows(world: World) -> None:
    """clusterRT sends forever (one row a second): the first rows, their numbers normalised, are the same."""
    runs = world.both("clusterRT", "-n", "{ns}", "-a", "1", "-s", "16", "-i", "1", timeout=2, partial=True)
    rows = [lines(normalise(r.out, numbers=(_RATE, _INT)))[:2] for r in runs]
    assert rows[0][0].startswith("#Cluster Name"), runs[0]
    assert rows[1] == rows[0]
    assert all(r.exit == STOPPED for r in runs)


def test_start_monitoring_prints_nothing_on_both(world: World) -> None:
    """startMonitoring starts RocketMQ's monitor service in the background (it logs what it finds) and prints
    nothing (its service runs until the batch ends)."""
    assert_same(world.both("startMonitoring", "-n", "{ns}"))


def test_export_metadata_writes_the_same_files(world: World) -> None:
    """exportMetadata's topic, group and cluster files hold the same (export times and data versions aside)."""
    for args, name in ((("-c", CLUSTER), "metadata.json"), (("-b", "{br}", "-t"), "topic.json"),
                       (("-b", "{br}", "-g"), "subscriptionGroup.json")):  # fmt: skip
        docs = []
        for s in (world.ref, world.ours):
            folder = world.tmp / f"export-{s.side.name}"
            run = world.one(s, "exportMetadata", "-n", "{ns}", *args, "-f", str(folder))
            assert "success" in run.out, run
            doc = json.loads((folder / name).read_text())
            doc.pop("exportTime", None)
            doc.pop("dataVersion", None)
            docs.append(_mine_only(doc))
        assert docs[1] == docs[0], name


def _mine_only(doc: dict[str, object]) -> dict[str, object]:
    """The document with only this module's topics and groups in its tables."""
    return {k: {n: v for n, v in t.items() if n.startswith("adm")} if isinstance(t, dict) else t
            for k, t in doc.items()}  # fmt: skip


# ---------------------------------------------------------------------------------------------------- differs


def test_topic_list_differs_only_by_rocketmq_internal_topics(world: World) -> None:
    theirs, ours = (set(lines(r.out)) for r in world.both("topicList", "-n", "{ns}"))
    internal = {t for t in theirs - ours if t.startswith(("RMQ_SYS_", "rmq_sys_")) or t == "BenchmarkTest"}
    # RocketMQ's POP keeps a retry topic per group and topic (%RETRY%<group>_<topic>, made by a group's first POP,
    # e.g. test_consume_start's); sievemq's POP redelivers from the queue itself (docs/pop.md, docs/compat.md)
    internal |= {t for t in theirs - ours if t.startswith("%RETRY%") and any(t.endswith(f"_{x}") for x in theirs)}
    assert theirs - internal == ours
    assert {TOPIC, TOPIC_L2} <= ours


def test_topic_list_with_groups_differs_only_by_rocketmq_internal_topics(world: World) -> None:
    runs = world.both("topicList", "-n", "{ns}", "-c")
    theirs, ours = ({tuple(ln.split()) for ln in lines(r.out)} for r in runs)
    internal = {
        row for row in theirs - ours if row[1].startswith(("RMQ_SYS_", "rmq_sys_")) or row[1] == "BenchmarkTest"
    }
    assert theirs - internal == ours
    assert (CLUSTER, TOPIC, GROUP) in ours


def test_cluster_list_differs_only_by_the_version(world: World) -> None:
    runs = world.both("clusterList", "-n", "{ns}")
    # rates, hours and RocketMQ's timer wheel progress (sievemq's timers report otherwise: 0-0) vary
    theirs, ours = (lines(normalise(re.sub(r"\d+-\d+\(", "N-N(", r.out), numbers=(r"\d+\.\d\d",))) for r in runs)
    assert ours[0] == theirs[0]
    their_row, our_row = theirs[1].split(), ours[1].split()
    assert their_row[4] == "V5_5_0" and our_row[4:6] == ["sievemq", our_row[5]]
    assert our_row[:4] + our_row[6:] == their_row[:4] + their_row[5:]
    assert our_row[-1] == "true"


def test_broker_status_has_rocketmqs_entries_but_those_listed(world: World) -> None:
    theirs, ours = (kv_lines(r.out) for r in world.both("brokerStatus", "-n", "{ns}", "-b", "{br}"))
    not_ours = {
        "getMissTps", "getTotalTps", "putMessageDistributeTime", "putMessageEntireTimeMax", "getMessageEntireTimeMax",
        "putMessageFailedTimes", "remainTransientStoreBufferNumbs", "dispatchMaxBuffer", "timerReadBehind",
        "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps",
    } | {k for k in theirs if k.endswith("Capacity") or k.startswith("commitLogDiskRatio_")}  # fmt: skip
    assert set(theirs) - not_ours <= set(ours), set(theirs) - not_ours - set(ours)
    for key in ("brokerActive", "msgPutTotalTodayMorning", "msgGetTotalTodayMorning", "commitLogMinOffset",
                "dispatchBehindBytes", "pageCacheLockTimeMills", "sendThreadPoolQueueSize",
                "startAcceptSendRequestTimeStamp"):  # fmt: skip
        assert ours[key] == theirs[key], key
    assert theirs["brokerVersionDesc"] == "V5_5_0" and ours["brokerVersionDesc"].startswith("sievemq ")
    for key in ("bootTimestamp", "earliestMessageTimeStamp"):
        assert abs(int(ours[key]) - int(theirs[key])) < 3_600_000, key
    assert re.fullmatch(r"\[ 0 days, \d+ hours, \d+ minutes, \d+ seconds \]", ours["runtime"])
    for key in ("putTps", "getTransferredTps", "getFoundTps"):
        assert re.fullmatch(r"[\d.E-]+(?: [\d.E-]+){0,2}", ours[key]), (key, ours[key])
    assert int(ours["msgPutTotalTodayNow"]) >= MESSAGES and int(ours["msgGetTotalTodayNow"]) >= MESSAGES
    assert re.fullmatch(r"Total : [\d.]+ \w+, Free : [\d.]+ \w+\.", ours["commitLogDirCapacity"])


def test_broker_config_shares_rocketmqs_keys_and_values(world: World) -> None:
    theirs, ours = (kv_lines(r.out, "=") for r in world.both("getBrokerConfig", "-n", "{ns}", "-b", "{br}"))
    for key in ("brokerName", "brokerClusterName", "brokerId", "flushDiskType", "autoCreateTopicEnable",
                "autoCreateSubscriptionGroup", "enablePropertyFilter", "brokerRole", "messageDelayLevel",
                "fileReservedTime", "deleteWhen", "maxMessageSize", "longPollingEnable"):  # fmt: skip
        assert key in ours and key in theirs, key
        if key == "fileReservedTime":  # 72 in RocketMQ, 72.0 in sievemq
            assert float(ours[key]) == float(theirs[key]), key
        else:
            assert ours[key] == theirs[key], key


def test_namesrv_config_shares_rocketmqs_names(world: World) -> None:
    runs = world.both("getNamesrvConfig", "-n", "{ns}")
    theirs, ours = (kv_lines(r.out, "=") for r in runs)
    for s, got in ((world.ref, theirs), (world.ours, ours)):
        assert got["listenPort"] == s.side.namesrv.rsplit(":", 1)[1], s.side.name
    assert ours["orderMessageEnable"] == theirs["orderMessageEnable"] == "false"
    assert not any("secret" in k.lower() or "password" in k.lower() for k in ours)


def test_write_perm_wipe_and_add_differ_only_by_the_count(world: World) -> None:
    for command, perm in (("wipeWritePerm", 4), ("addWritePerm", 6)):
        runs = world.both(command, "-n", "{ns}", "-b", BROKER)
        assert_same(runs, _INT)
        for s, run in zip((world.ref, world.ours), runs, strict=True):
            count = int(run.out.split()[-1])
            topics = lines(world.one(s, "topicList", "-n", "{ns}").out)
            assert count == len(topics), (s.side.name, count, topics)
            route = world.one(s, "topicRoute", "-n", "{ns}", "-t", TOPIC).out
            assert re.findall(r'"perm":(\d+)', route) == [str(perm)], (s.side.name, route)


def test_stats_all_counts_the_same_messages_in(world: World) -> None:
    def counted(s: SideState) -> list[str]:
        return lines(world.one(s, "statsAll", "-n", "{ns}", "-t", TOPIC_STATS).out)[1].split()

    # RocketMQ's minute statistics are sampled every 10 s: wait until its count shows the messages
    _wait("RocketMQ counts the messages", lambda: counted(world.ref)[-2] == str(STATS_MESSAGES))
    theirs, ours = counted(world.ref), counted(world.ours)
    assert ours[0] == theirs[0] == TOPIC_STATS
    assert ours[-2] == theirs[-2] == str(STATS_MESSAGES)
    assert ours[-1] == theirs[-1] == "NO_CONSUMER"


def test_stats_all_counts_what_a_group_consumed(world: World) -> None:
    """statsAll's row of GROUP on TOPIC: what is left to consume, the messages in and out over the day (GROUP's push
    consumer pulled the MESSAGES); the TPS figures depend on when each broker samples."""

    def row(s: SideState) -> list[str]:
        rows = [ln.split() for ln in lines(world.one(s, "statsAll", "-n", "{ns}", "-t", TOPIC).out)[1:]]
        return next((r for r in rows if r[:2] == [TOPIC, GROUP]), [])

    _wait("RocketMQ counts what GROUP consumed", lambda: row(world.ref)[-1:] == [str(MESSAGES)])
    theirs, ours = row(world.ref), row(world.ours)
    assert (ours[2], ours[-2], ours[-1]) == (theirs[2], theirs[-2], theirs[-1]) == ("0", str(MESSAGES), str(MESSAGES))


def test_consumer_progress_counts_what_was_pulled_and_not_committed(world: World) -> None:
    """A group pulls the MESSAGES of TOPIC's queue and commits only the first: #Inflight counts the other two on
    both (each broker notes where a group's last pull left off)."""
    group = "admGInflight"
    assert_same(world.both("updateSubGroup", "-n", "{ns}", "-c", CLUSTER, "-g", group))
    # consumerProgress -g reads the group's retry topic's route, which a consumer's heartbeat would have made
    assert_same(world.both("updateTopic", "-n", "{ns}", "-c", CLUSTER, "-t", f"%RETRY%{group}", "-r", "1", "-w", "1"))

    async def pull_then_commit(side: Side) -> None:
        conn = await broker_connection(side)
        try:
            r = await pull_message(conn, group, TOPIC, QUEUE, 0, max_nums=MESSAGES)
            assert (r.code, len(r.messages)) == (ResponseCode.SUCCESS, MESSAGES), (side.name, r.code, r.remark)
            fields = {"consumerGroup": group, "topic": TOPIC, "queueId": QUEUE, "commitOffset": 1}
            resp = await conn.request(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields), 30.0)
            assert resp.code == ResponseCode.SUCCESS, (side.name, resp.code, resp.remark)
        finally:
            conn.close()

    for s in (world.ref, world.ours):
        asyncio.run(pull_then_commit(s.side))
    runs = world.both("consumerProgress", "-n", "{ns}", "-g", group)
    assert_same(runs, _RATE)
    row = next(r for r in (ln.split() for ln in lines(runs[1].out)) if r[0] == TOPIC and r[2] == str(QUEUE))
    assert row[3:7] == [str(MESSAGES), "1", str(MESSAGES - 1), str(MESSAGES - 1)], runs[1].out  # diff, inflight


def test_clone_group_offset_to_an_unknown_group_is_refused(world: World) -> None:
    """Both take offsets only of a group they have (UPDATE_CONSUMER_OFFSET answers 26)."""
    theirs, ours = world.both("cloneGroupOffset", "-n", "{ns}", "-s", GROUP, "-d", "admUnknown", "-t", TOPIC)
    assert "CODE: 26" in theirs.err, theirs
    assert "CODE: 26" in ours.err and "clone group offset success" not in ours.out, ours


def test_message_listings_differ_only_by_stored_size(world: World) -> None:
    """printMsg, printMsgByQueue, consumeMessage and queryCq: the same but storeSize and the commit-log offsets,
    sievemq's stored message one byte shorter each."""
    sizes = re.compile(r"(storeSize|physicSize)=(\d+)")
    offsets = r"(?<=commitLogOffset=)\d+|(?<=physicOffset=)\d+|(?<=msgId=)\w+"
    for args in (("printMsg", "-t", TOPIC, "-c", "UTF-8", "-d", "true"),
                 ("printMsgByQueue", "-t", TOPIC, "-a", BROKER, "-i", str(QUEUE), "-c", "UTF-8", "-p", "true"),
                 ("consumeMessage", "-t", TOPIC, "-b", BROKER, "-i", str(QUEUE), "-o", "0", "-c", str(MESSAGES)),
                 ("queryCq", "-t", TOPIC, "-q", str(QUEUE), "-i", "0", "-c", str(MESSAGES))):  # fmt: skip
        runs = world.both(args[0], "-n", "{ns}", *args[1:])
        theirs, ours = ([int(m.group(2)) for m in sizes.finditer(r.out)] for r in runs)
        assert len(theirs) == MESSAGES and ours == [n - 1 for n in theirs], (args[0], theirs, ours)
        masked = [r._replace(out=sizes.sub(r"\1=N", re.sub(offsets, "N", r.out))) for r in runs]
        assert_same((masked[0], masked[1]))
    # the second message lies one byte less after the first in sievemq's log (#IndexKey ends with its offset)
    first, second = (world.both("queryMsgByKey", "-n", "{ns}", "-t", TOPIC, "-k", k) for k in ("key0", "key1"))
    theirs, ours = (int(b.out.split("@")[-1]) - int(a.out.split("@")[-1]) for a, b in zip(first, second, strict=True))
    assert ours == theirs - 1, (theirs, ours)


def test_exports_of_configs_and_metrics_differ_only_as_written(world: World) -> None:
    docs = {}
    for s in (world.ref, world.ours):
        folder = world.tmp / f"export2-{s.side.name}"
        for command in ("exportConfigs", "exportMetrics"):
            run = world.one(s, command, "-n", "{ns}", "-c", CLUSTER, "-f", str(folder))
            assert "success" in run.out, run
        docs[s.side.name] = (json.loads((folder / "configs.json").read_text()),
                             json.loads((folder / "metrics.json").read_text()))  # fmt: skip
    (their_cfg, their_metrics), (our_cfg, our_metrics) = docs["rocketmq"], docs["sievemq"]
    assert our_cfg["clusterScale"] == their_cfg["clusterScale"]
    theirs, ours = their_cfg["brokerConfigs"][BROKER], our_cfg["brokerConfigs"][BROKER]
    missing = {"traceOn", "msgTraceTopicName", "traceTopicEnable", "useTLS"}
    assert set(theirs) - missing <= set(ours), set(theirs) - missing - set(ours)
    assert set(ours) - set(theirs) <= {"filterServerNums"}
    assert {k: v for k, v in ours.items() if k in theirs} == {k: theirs[k] for k in ours if k in theirs}
    their_quota = their_metrics["evaluateReport"][BROKER]["runtimeQuota"]
    our_quota = our_metrics["evaluateReport"][BROKER]["runtimeQuota"]
    assert set(our_quota) == set(their_quota)
    assert our_metrics["evaluateReport"][BROKER]["runtimeEnv"] == {}


# ---------------------------------------------------------------------------------------------------- unsupported

UNSUPPORTED_ANSWERED_3: list[tuple[str, ...]] = [
    ("setConsumeMode", "-b", "{br}", "-g", GROUP, "-t", TOPIC, "-m", "PULL"),
    ("updateBrokerConfig", "-b", "{br}", "-k", "flushDiskType", "-v", "ASYNC_FLUSH"),
    ("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"),
    ("haStatus", "-b", "{br}"),
    ("resetMasterFlushOffset", "-b", "{br}", "-o", "0"),
    ("setCommitLogReadAheadMode", "-b", "{br}", "-m", "0"),
    ("switchTimerEngine", "-b", "{br}", "-e", "R"),
    ("getColdDataFlowCtrInfo", "-b", "{br}"),
    ("getBrokerLiteInfo", "-b", "{br}"),
]
"""Unsupported commands that reach sievemq: each is answered REQUEST_CODE_NOT_SUPPORTED (3)."""


@pytest.mark.parametrize("args", UNSUPPORTED_ANSWERED_3, ids=[a[0] for a in UNSUPPORTED_ANSWERED_3])
def test_unsupported_commands_are_answered_not_supported(world: World, args: tuple[str, ...]) -> None:
    assert COMMANDS[args[0]].status == "unsupported"
    run = world.one(world.ours, args[0], "-n", "{ns}", *args[1:])
    assert "CODE: 3 " in run.err + run.out, run
