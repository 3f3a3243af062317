"""Apache RocketMQ's Java 5.x gRPC client (``rocketmq-client-java``, the shaded jar of Maven Central) against the gRPC
proxy of one ``sievemq dev`` (docs/clients.md, "RocketMQ 5.x clients"; docs/proxy.md).

The driver (tests/interop/drivers/java5grpc, built by tests/interop/setup_java5_grpc.sh) runs the client's own
Producer, SimpleConsumer and PushConsumer and prints one JSON event per line. What is checked:

- a normal send is received by a SimpleConsumer and acked, every message once, tag, keys and properties intact;
- FIFO: a message group's messages reach a PushConsumer of a FIFO group in the order sent, a failed one again
  before the next of its group;
- delay: a message is not delivered before its delivery timestamp (no upper bound is asserted);
- transactions: a commit is delivered, a rollback never, an open transaction is settled by the check-back the
  producer's TransactionChecker answers;
- a PushConsumer with a TAG and with a SQL92 filter gets exactly the matching messages (one failed delivery comes
  back with its delivery attempt raised);
- a message not acked, or whose invisible time was changed, comes back with attempt 2, not before its new time;
- through a second proxy, with ACL, in front of the same dev: the right accounts send and receive, a wrong secret,
  no credentials or an account without PUB are refused.

``JAVA5_GRPC_VERSION`` picks the client version (default 5.0.8, the newest 5.0.x; it writes no log, an upstream
defect: 5.0.7 logs to logs/rocketmq/rocketmq-client.log of each run's directory, shown when a test fails)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from sievemq.client import api
from sievemq.remoting.connection import connect
from tests.interop.clients import JAVA_OPTIONS, interop_dir, unique_name
from tests.interop.test_against_sievemq import create_topic, ns
from tests.support.procs import Proc, dev_proc, proxy_proc

pytestmark = pytest.mark.interop

VERSION = os.environ.get("JAVA5_GRPC_VERSION", "5.0.8")
FAST_CHECKS = {"SIEVEMQ_TRANSACTION_TIMEOUT": "500", "SIEVEMQ_TRANSACTION_CHECK_INTERVAL": "1000",
               "SIEVEMQ_MIN_INVISIBLE_TIME_MILLS_FOR_RECV": "1000"}
"""The broker checks a transaction left open 0.5 s after it was stored, every second (RocketMQ's are 6 s, 30 s);
the proxy takes receives of 1 s invisible time (RocketMQ's least is 10 s), which keeps redelivery tests short."""
Predicate = Callable[[dict[str, Any]], bool]
WAIT = 120.0
"""Safety net for a driver to finish; each driver's own ``--timeout`` is shorter."""

PRODUCER = ("j5producer", "j5producer-secret")
CONSUMER = ("j5consumer", "j5consumer-secret")
ACL_TOPIC, ACL_GROUP = "Java5AclT", "Java5AclG"
ACL = f"""
accounts:
  - accessKey: {PRODUCER[0]}
    secretKey: {PRODUCER[1]}
    topicPerms: [{ACL_TOPIC}=PUB]
  - accessKey: {CONSUMER[0]}
    secretKey: {CONSUMER[1]}
    topicPerms: [{ACL_TOPIC}=SUB]
    groupPerms: [{ACL_GROUP}=SUB]
"""


# ---------------------------------------------------------------------------------------------------- the driver


def java5_command(args: Sequence[str]) -> list[str]:
    """``java ... io.sievemq.interop5.Driver5 ARGS`` on the classpath of the driver and the client only."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")
    d = interop_dir() / f"java-rocketmq-client-java-{VERSION}"
    return [java, *JAVA_OPTIONS, "-cp", f"{d / 'driver.jar'}:{d / 'lib'}/*", "io.sievemq.interop5.Driver5", *args]


class Java5:
    """One driver run in the background (its own working directory under ``base``); a thread collects its events."""

    def __init__(self, base: Path, args: Sequence[str]) -> None:
        self.cmd = java5_command(args)
        self.dir = base / f"{time.strftime('%H%M%S')}-{args[0]}-{unique_name('run')}"
        self.dir.mkdir(parents=True)
        self._stderr = open(self.dir / "stderr", "wb")  # noqa: SIM115 - closed when the run ends
        self._events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL,
                                     cwd=self.dir, start_new_session=True)  # fmt: skip
        self._reader = threading.Thread(target=self._read, name=f"java5-{self.proc.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                with open(self.dir / "events.jsonl", "ab") as f:  # kept for a look after the test
                    f.write(raw)
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    event = {"event": "stdout", "line": line}
                with self._cond:
                    self._events.append(event)
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._events)

    def of(self, *names: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") in names]

    def wait_for(
        self, name: str, count: int = 1, timeout: float = WAIT, predicate: Predicate | None = None
    ) -> list[dict[str, Any]]:
        """Until ``count`` events ``name`` (matching ``predicate``) came; fails if the run ends first or on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [e for e in self._events if e.get("event") == name and (predicate is None or predicate(e))]
                if len(got) >= count or self._eof or time.monotonic() > deadline:
                    break
                self._cond.wait(0.5)
        if len(got) < count:
            why = "the driver ended" if self._eof else f"nothing after {timeout} s"
            pytest.fail(f"waiting for {count} x {name!r}: {why}, got {len(got)}\n{self.describe()}")
        return got

    def wait(self, timeout: float = WAIT) -> int:
        """The exit code of the run, once it ended by itself (killed and failed after ``timeout``)."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"the driver did not end within {timeout} s\n{self.describe()}")
        self._reader.join(5)
        self._stderr.close()
        return code

    def stop(self) -> int:
        """SIGTERM (the driver then prints "done"), SIGKILL if it is still there 15 s later."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._reader.join(5)
        self._stderr.close()
        return self.proc.returncode

    def describe(self) -> str:
        lines = [f"cmd: {' '.join(self.cmd)}", f"exit code: {self.proc.poll()}", "---- events ----"]
        lines += [json.dumps(e)[:500] for e in self.events[-60:]]
        lines += ["---- stderr (tail) ----", (self.dir / "stderr").read_text(errors="replace")[-4000:]]
        client_log = self.dir / "logs" / "rocketmq" / "rocketmq-client.log"
        if client_log.exists():
            lines += ["---- client log (tail) ----", client_log.read_text(errors="replace")[-6000:]]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- fixtures


class Cluster:
    """The module's dev (its proxy at ``endpoints``) and where its runs keep their directories."""

    def __init__(self, dev: Proc, base: Path) -> None:
        self.dev, self.base, self.endpoints = dev, base, str(dev.extra["grpc"])
        self.runs: list[Java5] = []

    def start(self, command: str, topic: str, *args: str, endpoints: str | None = None) -> Java5:
        run = Java5(self.base, [command, "--endpoints", endpoints or self.endpoints, "--topic", topic, *args])
        self.runs.append(run)
        return run

    def run(self, command: str, topic: str, *args: str, endpoints: str | None = None) -> Java5:
        run = self.start(command, topic, *args, endpoints=endpoints)
        run.wait()
        return run

    def consumer(self, command: str, topic: str, *args: str, endpoints: str | None = None) -> Java5:
        """A consumer run, once it started (its start registered the group with the brokers)."""
        run = self.start(command, topic, *args, endpoints=endpoints)
        run.wait_for("ready")
        return run

    def topic(self, prefix: str, queues: int = 1) -> str:
        name = unique_name(prefix)
        create_topic(self.dev, name, queues=queues)
        return name


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("interop-java5-grpc")
    dev = dev_proc(tmp, http=False)
    dev.env.update(FAST_CHECKS)
    dev.start()
    try:
        yield Cluster(dev, tmp / "runs")
    finally:
        assert dev.stop() == 0, dev.log()[-5000:]


@pytest.fixture(autouse=True)
def _no_run_left(cluster: Cluster) -> Iterator[None]:
    """A run a failed test left going is stopped at its end."""
    yield
    for run in cluster.runs:
        if run.proc.poll() is None:
            run.stop()
    cluster.runs.clear()


@pytest.fixture(scope="module")
def acl_proxy(cluster: Cluster) -> Iterator[Proc]:
    """A second proxy in front of the same dev that checks every call against ``ACL`` (the brokers check none)."""
    acl = cluster.base.parent / "plain_acl.yml"
    acl.write_text(ACL)
    create_topic(cluster.dev, ACL_TOPIC, queues=1)
    flags = ["--acl-enable", "true", "--acl-file", str(acl)]
    proxy = proxy_proc(cluster.base.parent, ns(cluster.dev), "proxy-acl", *flags)
    proxy.start()
    try:
        yield proxy
    finally:
        assert proxy.stop() == 0, proxy.log()[-5000:]


def _ok(run: Java5) -> None:
    """The run ended well, and no call of it failed on the way."""
    assert run.wait() == 0 and not run.of("error"), run.describe()


def _bodies(dev: Proc, topic: str) -> list[bytes]:
    """What queue 0 of ``topic`` holds, read by a 4.x pull of a new group."""

    async def go() -> list[bytes]:
        conn = await connect("127.0.0.1", dev.port)
        try:
            r = await api.pull_message(conn, unique_name("Rd"), topic, 0, 0, max_nums=64, subscription="*")
            return [m.body for m in r.messages]
        finally:
            conn.close()

    return asyncio.run(go())


def _group(dev: Proc, *flags: str) -> str:
    """A consumer group made with ``sievemq group update`` (``--orderly``: FIFO)."""
    name = unique_name("GJ5")
    out = subprocess.run([sys.executable, "-m", "sievemq.cli", "group", "update", name, "-n", ns(dev), *flags],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return name


# ------------------------------------------------------------------------------------------------------- tests


def test_normal_messages_reach_a_simple_consumer_each_once(cluster: Cluster) -> None:
    topic = cluster.topic("J5N", queues=2)
    consumer = cluster.consumer("simple-consume", topic, "--group", unique_name("GJ5"), "--count", "6", "--linger",
                                "3", "--timeout", "60")  # fmt: skip
    sent = cluster.run("produce", topic, "--count", "6", "--tags", "TagA,TagB", "--key-prefix", "k", "--prop",
                       "n={i}", "--prop", "region=eu")  # fmt: skip
    _ok(sent)
    _ok(consumer)
    ids = sorted(e["message_id"] for e in sent.of("sent"))
    assert len(ids) == 6 and len(set(ids)) == 6, sent.describe()
    received = consumer.of("received")
    assert sorted(e["message_id"] for e in received) == ids, f"every message once\n{consumer.describe()}"
    assert sorted(e["message_id"] for e in consumer.of("acked")) == ids, consumer.describe()
    for e in received:
        i = int(e["body"][1:])
        assert (e["topic"], e["tag"], e["keys"], e["attempt"]) == (topic, ["TagA", "TagB"][i % 2], [f"k{i}"], 1), e
        assert e["properties"] == {"n": str(i), "region": "eu"}, e


def test_fifo_messages_of_a_group_arrive_in_order(cluster: Cluster) -> None:
    """Three message groups, interleaved, over two queues, to a PushConsumer of a FIFO group (``--orderly``) whose
    first delivery fails: each group's messages are consumed in the order sent, the failed one again first."""
    topic = cluster.topic("J5F", queues=2)
    groups, per_group = ["ga", "gb", "gc"], 4
    consumer = cluster.consumer("push-consume", topic, "--group", _group(cluster.dev, "--orderly"), "--count",
                                str(len(groups) * per_group), "--fail-first", "1", "--timeout", "90")  # fmt: skip
    sent = cluster.run("produce", topic, "--count", str(len(groups) * per_group), "--groups", ",".join(groups))
    _ok(sent)
    _ok(consumer)
    assert {e["body"]: e["group"] for e in sent.of("sent")} == {
        f"{g}-{n}": g for g in groups for n in range(per_group)
    }, sent.describe()
    failed = consumer.of("failed")
    assert len(failed) == 1, consumer.describe()
    for g in groups:
        want = [f"{g}-{n}" for n in range(per_group)]
        acked = [e["body"] for e in consumer.of("acked") if e["group"] == g]
        assert acked == want, f"{g}: acked {acked}\n{consumer.describe()}"
        got = [(e["body"], e["attempt"]) for e in consumer.of("received") if e["group"] == g]
        runs = [b for i, (b, _) in enumerate(got) if i == 0 or got[i - 1][0] != b]
        assert runs == want, f"{g}: delivered {got}\n{consumer.describe()}"
    again = [e["attempt"] for e in consumer.of("received") if e["body"] == failed[0]["body"]]
    assert again == [1, 2], f"the failed message once more, attempt 2: {again}\n{consumer.describe()}"


def test_a_delayed_message_is_not_delivered_before_its_time(cluster: Cluster) -> None:
    topic = cluster.topic("J5D", queues=2)
    consumer = cluster.consumer("simple-consume", topic, "--group", unique_name("GJ5"), "--count", "3", "--timeout",
                                "60")  # fmt: skip
    sent = cluster.run("produce", topic, "--count", "3", "--delay-ms", "4000", "--key-prefix", "d")
    _ok(sent)
    _ok(consumer)
    due = {e["message_id"]: e["delivery_ms"] for e in sent.of("sent")}
    received = consumer.of("received")
    assert sorted(e["message_id"] for e in received) == sorted(due), consumer.describe()
    for e in received:
        assert e["delivery_ms"] == due[e["message_id"]], f"it carries its delivery timestamp: {e}"
        assert e["ts_ms"] >= due[e["message_id"]], f"delivered {due[e['message_id']] - e['ts_ms']} ms early: {e}"


def test_transactions_commit_is_delivered_rollback_never_and_check_backs_settle_open_ones(cluster: Cluster) -> None:
    topic = cluster.topic("J5T")
    consumer = cluster.consumer("simple-consume", topic, "--group", unique_name("GJ5"), "--count", "2", "--linger",
                                "3", "--timeout", "90")  # fmt: skip
    producer = cluster.start("transaction", topic, "--count", "4", "--plan",
                             "commit,rollback,check-commit,check-rollback", "--linger", "90")  # fmt: skip
    try:
        producer.wait_for("checked", predicate=lambda e: e["body"] == "tx-2")
        producer.wait_for("checked", predicate=lambda e: e["body"] == "tx-3")
        _ok(consumer)
    finally:
        code = producer.stop()
    assert code == 0 and not producer.of("error"), producer.describe()
    assert [e["body"] for e in producer.of("sent")] == ["tx-0", "tx-1", "tx-2", "tx-3"], producer.describe()
    answers = {e["body"]: e["answer"] for e in producer.of("checked")}
    assert (answers["tx-2"], answers["tx-3"]) == ("COMMIT", "ROLLBACK"), producer.describe()
    assert sorted(e["body"] for e in consumer.of("received")) == ["tx-0", "tx-2"], consumer.describe()
    assert sorted(_bodies(cluster.dev, topic)) == [b"tx-0", b"tx-2"], "the topic holds the committed ones only"


@pytest.mark.parametrize(
    ("expr", "wanted"),
    [(("--tag-expr", "TagA || TagC"), [0, 2, 3, 5, 6, 8]), (("--sql", "n > 2 AND n <> 5"), [3, 4, 6, 7, 8])],
    ids=["tag", "sql92"],
)
def test_a_push_consumer_gets_exactly_the_matching_messages(
    cluster: Cluster, expr: tuple[str, str], wanted: list[int]
) -> None:
    """Nine messages in one queue, the last one matching: a message that did not match would come before it. The
    first delivery fails: it comes back with attempt 2 after the client's backoff (its nack changes the message's
    invisible time)."""
    topic = cluster.topic("J5P")
    consumer = cluster.consumer("push-consume", topic, "--group", unique_name("GJ5"), *expr, "--count",
                                str(len(wanted)), "--fail-first", "1", "--linger", "2", "--timeout", "90")  # fmt: skip
    sent = cluster.run("produce", topic, "--count", "9", "--tags", "TagA,TagB,TagC", "--prop", "n={i}")
    _ok(sent)
    _ok(consumer)
    assert sorted(e["body"] for e in consumer.of("acked")) == sorted(f"m{i}" for i in wanted), consumer.describe()
    assert {e["body"] for e in consumer.of("received")} == {f"m{i}" for i in wanted}, "only the matching ones"
    [failed] = consumer.of("failed")
    again = [e for e in consumer.of("received") if e["body"] == failed["body"]]
    assert [e["attempt"] for e in again] == [1, 2], consumer.describe()
    # The client nacks with its first backoff, 1 s: the broker hands the message out again then, to the receive
    # that is long-polling meanwhile (RocketMQ's revive wakes it too), not when that poll ends (the proxy's 20 s).
    assert again[1]["ts_ms"] - failed["ts_ms"] < 15_000, consumer.describe()


@pytest.mark.parametrize("change", [None, 5], ids=["not-acked", "invisible-duration-changed"])
def test_a_message_not_acked_comes_back_with_a_higher_attempt(cluster: Cluster, change: int | None) -> None:
    """Received with 2 s of invisible time and not acked: it comes back, attempt 2; the other one, acked, never
    comes back. With ``change``, its invisible time is changed to that many seconds at once: it comes back no
    earlier than that after the change was asked for."""
    topic = cluster.topic("J5I")
    extra = ["--change", str(change)] if change is not None else []
    consumer = cluster.consumer("simple-consume", topic, "--group", unique_name("GJ5"), "--count", "2", "--batch",
                                "1", "--hold-first", "1", "--invisible", "2", *extra, "--linger", "1", "--timeout",
                                "60")  # fmt: skip
    _ok(cluster.run("produce", topic, "--count", "2"))
    _ok(consumer)
    [held] = consumer.of("held")
    got = [(e["body"], e["attempt"]) for e in consumer.of("received")]
    other = "m1" if held["body"] == "m0" else "m0"
    assert sorted(got) == sorted([(held["body"], 1), (held["body"], 2), (other, 1)]), consumer.describe()
    if change is not None:
        again = [e for e in consumer.of("received") if e["message_id"] == held["message_id"]][-1]
        [changed] = consumer.of("changed")
        # The change is asked after asked_at_ms: the new deadline is later still (10 ms for ms rounding).
        assert again["ts_ms"] - changed["asked_at_ms"] >= change * 1000 - 10, consumer.describe()


def test_with_acl_the_right_accounts_send_and_receive(cluster: Cluster, acl_proxy: Proc) -> None:
    consumer = cluster.consumer("simple-consume", ACL_TOPIC, "--group", ACL_GROUP, "--count", "3", "--linger", "1",
                                "--timeout", "60", "--access-key", CONSUMER[0], "--secret-key", CONSUMER[1],
                                endpoints=acl_proxy.addr)  # fmt: skip
    sent = cluster.run("produce", ACL_TOPIC, "--count", "3", "--tag", "T", "--access-key", PRODUCER[0],
                       "--secret-key", PRODUCER[1], endpoints=acl_proxy.addr)  # fmt: skip
    _ok(sent)
    _ok(consumer)
    assert sorted(e["message_id"] for e in consumer.of("received")) == sorted(e["message_id"] for e in sent.of("sent"))


@pytest.mark.parametrize(
    ("command", "creds", "reason"),
    [
        ("produce", (PRODUCER[0], "not-the-secret"), "ACL_SIGNATURE"),
        ("produce", None, "ACL_NO_CREDENTIALS"),
        ("simple-consume", (CONSUMER[0], "not-the-secret"), "ACL_SIGNATURE"),
    ],
    ids=["producer-wrong-secret", "producer-no-credentials", "consumer-wrong-secret"],
)
def test_with_acl_wrong_credentials_are_refused(
    cluster: Cluster, acl_proxy: Proc, command: str, creds: tuple[str, str] | None, reason: str
) -> None:
    """The client's start (its route query) is answered UNAUTHORIZED (40100) with the reason: it does not start."""
    args = ["--access-key", creds[0], "--secret-key", creds[1]] if creds else []
    if command == "simple-consume":
        args += ["--group", ACL_GROUP, "--timeout", "10"]
    run = cluster.run(command, ACL_TOPIC, *args, endpoints=acl_proxy.addr)
    assert run.wait() == 1, run.describe()
    [error] = run.of("error")
    assert (error["stage"], error["code"]) == ("start", 40100) and reason in error["error"], run.describe()
    assert not run.of("sent", "ready"), run.describe()


def test_with_acl_an_account_without_pub_cannot_start_a_producer(cluster: Cluster, acl_proxy: Proc) -> None:
    """The consumer's account may read the topic's route, but the proxy ends the Telemetry stream of a producer of
    the topic (PERMISSION_DENIED, NO_PERMISSION): the client's start waits for settings that never come (3 s plus
    its request timeout), and fails."""
    before = len(acl_proxy.log())
    run = cluster.run("produce", ACL_TOPIC, "--access-key", CONSUMER[0], "--secret-key", CONSUMER[1],
                      "--request-timeout-ms", "3000", endpoints=acl_proxy.addr)  # fmt: skip
    assert run.wait() == 1, run.describe()
    assert [e["stage"] for e in run.of("error")] == ["start"], run.describe()
    assert not run.of("sent"), run.describe()
    assert "NO_PERMISSION" in acl_proxy.log()[before:], acl_proxy.log()[before:]
