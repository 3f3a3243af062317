"""Real third-party clients across an automatic failover (issue 29: "the 4.x clients and the 5.x clients through the
proxy resume sending without a restart").

Each test starts the set (brokers 1, 2, 3 under etcd, topic ChaosT), starts one real client sending a message every
50 ms for the whole test and printing each outcome with its time (``ts``), kills the master (``kill -9``), waits for
the next epoch, then waits until the same client process has sends acknowledged again: the time from the kill to its
first one is printed (``pytest -s``). Every message the client saw acknowledged, before the kill or after it, must
be stored on the new master.

The clients: RocketMQ's Java DefaultMQProducer of 4.9.8 and of 5.5.0 (the Java driver's ``stream`` command), the C++
core (rocketmq-client-python 0.5.0rc2), ali-ons 3.12.0, and the 5.x Python and Node.js clients through a ``sievemq
proxy`` in front of the set's name server. The Java client and ali-ons learn the new master at their next route poll
(``pollNameServerInterval``, 30 s by default): they run with a 2 s poll here to keep the tests short
(``SIEVEMQ_CLIENT_POLL_MS=default`` gives them their own). The C++ core's poll is 30 s and cannot be changed; it
needs none: it fetches a topic's route again at every send while the route names no master. One more test keeps the
Java client's default poll and brings the old master back on its address before the client polls: the old master,
now a replica, must refuse every send it gets.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.remoting.codes import ResponseCode
from tests.interop.clients import DriverProcess, ensure_clients_installed, start_driver, unique_name
from tests.support.failover_sets import FailoverSet
from tests.support.failover_workload import QUEUES, TOPIC, three
from tests.support.procs import Proc, proxy_proc
from tests.support.replica_sets import read_all, until

pytestmark = pytest.mark.interop

INTERVAL_MS = 50
BEFORE = 20
"""Sends acknowledged before the kill."""
AFTER = 20
"""Sends acknowledged after the kill that show the client is back."""
POLL_MS = os.environ.get("SIEVEMQ_CLIENT_POLL_MS", "2000")
"""The route poll (ms) of the clients that let a test set it, the Java client and ali-ons: "default" leaves their
own, 30 s, which is what the C++ core always has."""
POLL_S = 30.0 if POLL_MS == "default" else int(POLL_MS) / 1000


def _poll(flag: str) -> list[str]:
    return [] if POLL_MS == "default" else [flag, POLL_MS]


@dataclass(frozen=True)
class Stream:
    """One client sending to ``TOPIC`` for the whole test: which driver, its arguments, the body it stores for the
    message of a ``sent`` event, and whether that event is an acknowledgement (SEND_OK)."""

    kind: str
    args: list[str]
    body: Callable[[dict[str, Any]], str]
    acked: Callable[[dict[str, Any]], bool]
    ts_per_s: float = 1.0
    """The unit of the driver's ``ts``: 1 for epoch seconds, 1000 for epoch milliseconds."""

    def ts(self, e: dict[str, Any]) -> float:
        """The epoch second an event of this driver was printed."""
        return float(e["ts"]) / self.ts_per_s


def java(kind: str, namesrv: str, *, poll: bool = True) -> Stream:
    """RocketMQ's Java DefaultMQProducer: 4.9.8 (``java4``) or 5.5.0's (``java5``); ``poll`` False: with its default
    route poll whatever ``SIEVEMQ_CLIENT_POLL_MS`` says."""
    args = ["stream", "--namesrv", namesrv, "--topic", TOPIC, "--group", unique_name("FoJava"), "--body",
            "java-{i}", "--interval-ms", str(INTERVAL_MS), "--duration", "240",
            *(_poll("--poll-namesrv-ms") if poll else [])]  # fmt: skip
    return Stream(kind, args, lambda e: str(e["body"]), lambda e: e.get("status") == "SEND_OK")


def cpp(namesrv: str) -> Stream:
    """The C++ core under rocketmq-client-python 0.5.0rc2 (its route poll is 30 s, fixed)."""
    args = ["produce", "--namesrv", namesrv, "--topic", TOPIC, "--group", unique_name("FoCpp"), "--body",
            "cpp-{i}", "--count", "1000000", "--interval-ms", str(INTERVAL_MS), "--keep-going",
            "--timeout", "240"]  # fmt: skip
    return Stream("rmqcp", args, lambda e: f"cpp-{e['i']}", lambda e: e.get("status") == "SEND_OK")


def ons(namesrv: str) -> Stream:
    """ali-ons 3.12.0 (pure JavaScript)."""
    args = ["produce", "--namesrv", namesrv, "--topic", TOPIC, "--group", unique_name("FoOns"), "--no-acl",
            "--body", "ons-{i}", "--count", "1000000", "--interval-ms", str(INTERVAL_MS), "--keep-going",
            "--timeout", "240", *_poll("--poll-namesrv-interval-ms")]  # fmt: skip
    return Stream("ons", args, lambda e: f"ons-{e['i']}", lambda e: e.get("status") == "SEND_OK")


def grpc5(kind: str, endpoint: str) -> Stream:
    """A 5.x client through a proxy: the Python one (``rmq5``) or the Node.js one (``rmq5-node``); a "sent" is an
    acknowledgement (a send not answered OK raises)."""
    args = ["produce", "--endpoints", endpoint, "--topic", TOPIC, "--count", "1000000",
            "--interval-ms", str(INTERVAL_MS)]  # fmt: skip
    if kind == "rmq5-node":
        return Stream(kind, [*args, "--timeout", "240"], lambda e: str(e["body"]), lambda e: True, 1000.0)
    return Stream(kind, args, lambda e: f"body-{e['i']}", lambda e: True)


def _acks(d: DriverProcess, s: Stream) -> list[dict[str, Any]]:
    return [e for e in d.of("sent") if s.acked(e)]


async def _acked_after(d: DriverProcess, s: Stream, t: float, n: int, what: str, timeout: float) -> None:
    """Until ``n`` sends came back acknowledged after the epoch time ``t``; fails at once if the driver exits."""

    async def probe() -> bool:
        assert d.poll() is None, f"the {s.kind} client exited\n{d.describe()}"
        return sum(1 for e in _acks(d, s) if s.ts(e) > t) >= n

    try:
        await until(probe, timeout, what)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{d.describe()}") from None


@dataclass
class Run:
    """What a client did across the kill."""

    resumed: float
    """Seconds from the kill to its first acknowledged send after it."""
    after: list[dict[str, Any]]
    """Its acknowledged sends after the kill."""
    failed: list[dict[str, Any]]
    """Its failed sends after the kill."""
    new_master: str
    """The new master's address."""


async def _across_a_kill(fset: FailoverSet, s: Stream, resume_timeout: float, *, restart: bool = False) -> Run:
    """Run ``s`` across a kill -9 of the master (``restart``: and the old master started again, on its address, as
    soon as the next one is elected); every send it saw acknowledged must be on the new master."""
    master = await three(fset)
    with start_driver(s.kind, s.args) as d:
        await _acked_after(d, s, 0.0, BEFORE, f"{BEFORE} sends acknowledged before the kill", 90.0)
        old = await fset.state()
        assert old is not None
        killed_at = time.time()
        fset.procs[master].kill9()
        new = await fset.wait_state(lambda st: st.master_epoch > old.master_epoch, "a new master elected")
        elected = time.time() - killed_at
        if restart:
            fset.broker(master).start()  # it serves once it follows the new master
        await _acked_after(d, s, killed_at, AFTER, f"{AFTER} sends acknowledged after the kill", resume_timeout)
        d.stop(grace=5.0)
        events = d.events
    acked = [e for e in events if e.get("event") == "sent" and s.acked(e)]
    after = [e for e in acked if s.ts(e) > killed_at]
    failed = [e for e in events if e.get("event") == "error" and "ts" in e and s.ts(e) > killed_at]
    run = Run(min(s.ts(e) for e in after) - killed_at, after, failed, new.master_address)
    last_before = max(s.ts(e) for e in acked if s.ts(e) <= killed_at)
    print(f"\n{s.kind}: new master (epoch {new.master_epoch}) {elected:.1f} s after the kill; first acknowledged send "
          f"{run.resumed:.1f} s after it (the last before it {killed_at - last_before:.2f} s before it); "
          f"{len(failed)} failed sends meanwhile; {len(acked)} acknowledged in all")  # fmt: skip
    stored = {m.body.decode() for m in await read_all(new.master_address, TOPIC, QUEUES)}
    missing = sorted({s.body(e) for e in acked} - stored)
    assert not missing, f"{len(missing)} acknowledged messages not on the new master: {missing[:10]}"
    return run


@pytest.fixture
def clients() -> None:
    """The real clients installed (tests/interop/setup_clients.sh; fails, never skips, when that does not work)."""
    ensure_clients_installed()


@pytest.mark.parametrize("kind", ["java4", "java5"])
async def test_the_java_client_resumes_sending_after_the_master_is_killed(
    fset: FailoverSet, clients: None, kind: str
) -> None:
    run = await _across_a_kill(fset, java(kind, fset.namesrv), POLL_S + 60.0)
    assert run.resumed < POLL_S + 25.0  # the lease (5 s), the election, the client's next route poll


async def test_ali_ons_resumes_sending_after_the_master_is_killed(fset: FailoverSet, clients: None) -> None:
    run = await _across_a_kill(fset, ons(fset.namesrv), POLL_S + 60.0)
    assert run.resumed < POLL_S + 25.0


async def test_the_cpp_core_resumes_sending_after_the_master_is_killed(fset: FailoverSet, clients: None) -> None:
    run = await _across_a_kill(fset, cpp(fset.namesrv), 90.0)
    assert run.resumed < 55.0  # its route poll is 30 s


@pytest.mark.parametrize("kind", ["rmq5", "rmq5-node"])
async def test_a_5x_client_through_the_proxy_resumes_after_the_master_is_killed(
    fset: FailoverSet, clients: None, kind: str
) -> None:
    proxy: Proc = proxy_proc(fset.tmp, fset.namesrv, "proxy")
    proxy.start()
    try:
        run = await _across_a_kill(fset, grpc5(kind, proxy.addr), 60.0)
    finally:
        assert proxy.stop() == 0, proxy.log()
    assert run.resumed < 25.0


async def test_a_java_client_still_sending_to_the_old_masters_address_is_refused_there(
    fset: FailoverSet, clients: None
) -> None:
    """The Java client with its default route poll (30 s) keeps the old master's address for up to 30 s; the old
    master is back on that address (a replica of the new one) meanwhile: it must acknowledge none of the client's
    sends, and the client resumes on the new master at its poll."""
    s = java("java4", fset.namesrv, poll=False)
    run = await _across_a_kill(fset, s, 90.0, restart=True)
    where = Counter("{}:{}".format(*parse_offset_msg_id(e["offset_msg_id"])[:2]) for e in run.after)
    assert set(where) == {run.new_master}, f"acknowledged after the kill by {where}, not only {run.new_master}"
    refused = Counter(str(e.get("response_code", e["error_type"])) for e in run.failed)
    print(f"java4 (default poll): failed sends after the kill by code: {dict(refused)}")
    back = refused[str(ResponseCode.SERVICE_NOT_AVAILABLE)]  # what a replica answers a send
    assert back, f"no send reached the old master back on its address: {refused}"
    assert run.resumed < 30.0 + 25.0
