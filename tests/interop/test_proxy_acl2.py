"""The real Python 5.x client through a proxy with ACL 2.0 (docs/acl2.md §9), in front of a broker with ACL 2.0: the
proxy fetches the broker's users and policies (GET_ALL_AUTH_METADATA, signed with its own Super user) and checks
each call as RocketMQ 5's proxy does.

A user allowed Pub on the topic sends; a user allowed Sub on topic and group receives exactly those messages; a
wrong password, an unknown user or no credentials are refused with UNAUTHORIZED (40100), a user without the policy
with FORBIDDEN (40300), the stable reason in the message, and nothing is delivered to them. A policy granted on the
broker applies at the proxy within its refresh time (waited for as a state)."""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import orjson
import pytest

from sievemq.admin.api import AdminClient
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.proxy.v2 import service_pb2_grpc as rpc
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.codes import ResponseCode as R
from tests.interop.clients import DriverResult, run_driver, start_driver, unique_name
from tests.support.procs import Proc, broker_proc, namesrv_proc, proxy_proc

pytestmark = pytest.mark.interop

ROOT = ("proxyRoot", "proxy-root-password")
PRODUCER = ("producer5", "producer5-password")
CONSUMER = ("consumer5", "consumer5-password")
LATE = ("late5", "late5-password")
TOPIC, GROUP = "Acl2T5", "G5acl2"
FLAGS = (
    "--authentication-enabled", "true", "--authorization-enabled", "true",
    "--init-authentication-user", orjson.dumps({"username": ROOT[0], "password": ROOT[1]}).decode(),
    "--inner-client-authentication-credentials", orjson.dumps({"accessKey": ROOT[0], "secretKey": ROOT[1]}).decode(),
)  # fmt: skip


async def _as_root(ns: str, broker: str, code: int, fields: dict[str, str], body: dict[str, object]) -> None:
    async with AdminClient(ns, access_key=ROOT[0], secret_key=ROOT[1]) as a:
        r = await a.request(broker, code, fields, orjson.dumps(body))
    assert r.code == R.SUCCESS, f"[{r.code}] {r.remark}"


async def add_user(ns: str, broker: str, user: tuple[str, str], *entries: tuple[str, list[str]]) -> None:
    await _as_root(ns, broker, C.AUTH_CREATE_USER, {"username": user[0]}, {"password": user[1]})
    if entries:
        await allow(ns, broker, user, *entries)


async def allow(ns: str, broker: str, user: tuple[str, str], *entries: tuple[str, list[str]]) -> None:
    await _as_root(ns, broker, C.AUTH_CREATE_ACL, {"subject": f"User:{user[0]}"}, {
        "subject": f"User:{user[0]}", "policies": [{"policyType": "Custom", "entries": [
            {"resource": r, "actions": a, "decision": "Allow"} for r, a in entries]}]})  # fmt: skip


async def _set_up(ns: str, broker: str) -> None:
    async with AdminClient(ns, access_key=ROOT[0], secret_key=ROOT[1]) as a:
        await a.create_topic(TOPIC, queues=2, broker=broker)
    await add_user(ns, broker, PRODUCER, (f"Topic:{TOPIC}", ["Pub"]))
    await add_user(ns, broker, CONSUMER, (f"Topic:{TOPIC}", ["Sub"]), (f"Group:{GROUP}", ["Sub"]))
    await add_user(ns, broker, LATE)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc, Proc]]:
    tmp = tmp_path_factory.mktemp("interop-proxy-acl2")
    ns = namesrv_proc(tmp, "ns-acl2").start()
    broker = broker_proc(tmp, ns.addr, "broker-acl2", *FLAGS)
    proxy = proxy_proc(tmp, ns.addr, "proxy", "--authentication-enabled", "true", "--authorization-enabled", "true",
                       "--acl-access-key", ROOT[0], "--auth-metadata-refresh-seconds", "1")  # fmt: skip
    proxy.env["SIEVEMQ_ACL_SECRET_KEY"] = ROOT[1]
    try:
        broker.start()
        asyncio.run(_set_up(ns.addr, broker.addr))
        proxy.start()
        yield ns, broker, proxy
    finally:
        assert proxy.stop() == 0, proxy.log()
        assert broker.stop() == 0, broker.log()
        ns.stop()


def account(creds: tuple[str, str] | None) -> dict[str, str]:
    return {"RMQ5_ACCESS_KEY": creds[0], "RMQ5_SECRET_KEY": creds[1]} if creds else {}


def produce(proxy: Proc, creds: tuple[str, str] | None, count: int = 2, tag: str = "T") -> DriverResult:
    return run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", TOPIC, "--count", str(count), "--tag",
                               tag, "--key-prefix", "k"], timeout=120, env=account(creds))  # fmt: skip


def errors(res: DriverResult) -> str:
    return " ".join(str(e.get("error", "")) for e in res.of("error"))


def query_route(proxy: Proc, creds: tuple[str, str] | None) -> pb.Status:
    """QueryRoute of TOPIC signed as the 5.x clients sign (the Python client does not show a refused route's
    status: it says only that it failed to fetch the route)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    metadata = [("x-mq-date-time", stamp), ("x-mq-client-id", "acl2-test"), ("x-mq-language", "PYTHON")]
    if creds is not None:
        sig = hmac.new(creds[1].encode(), stamp.encode(), "sha1").hexdigest()
        metadata.append(("authorization", f"MQv2-HMAC-SHA1 Credential={creds[0]}, SignedHeaders=x-mq-date-time, "
                                          f"Signature={sig}"))  # fmt: skip
    with grpc.insecure_channel(proxy.addr) as channel:
        stub = rpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        request = svc.QueryRouteRequest(topic=pb.Resource(name=TOPIC))
        answer: svc.QueryRouteResponse = stub.QueryRoute(request, metadata=metadata, timeout=10)
    return answer.status


def test_the_allowed_users_send_and_receive(cluster: tuple[Proc, Proc, Proc]) -> None:
    _, _, proxy = cluster
    args = ["simple-consume", "--endpoints", proxy.addr, "--topic", TOPIC, "--group", GROUP, "--tag-expr", "TOK",
            "--count", "3", "--timeout", "60"]  # fmt: skip
    c = start_driver("rmq5", args, env=account(CONSUMER))
    c.wait_for("ready", timeout=90)
    sent = produce(proxy, PRODUCER, count=3, tag="TOK")
    assert sent.returncode == 0, f"{sent.describe()}\n{proxy.log()[-3000:]}"
    assert c.wait(timeout=90) == 0, f"{c.describe()}\n{proxy.log()[-3000:]}"
    assert sorted(e["message_id"] for e in c.of("received")) == sorted(e["message_id"] for e in sent.of("sent"))


@pytest.mark.parametrize(
    ("creds", "code", "word"),
    [
        (None, 40100, "ACL_NO_CREDENTIALS"),
        ((PRODUCER[0], "not-the-password"), 40100, "ACL_SIGNATURE"),
        (("nobody5", "whatever"), 40100, "ACL_UNKNOWN_ACCOUNT"),
        (CONSUMER, 40300, "NO_PERMISSION"),
    ],
    ids=["no-credentials", "wrong-password", "unknown-user", "no-pub-policy"],
)  # fmt: skip
def test_a_send_without_the_right_is_refused_with_the_code(
    cluster: tuple[Proc, Proc, Proc], creds: tuple[str, str] | None, code: int, word: str
) -> None:
    _, _, proxy = cluster
    before = len(proxy.log())
    res = produce(proxy, creds, count=1)
    assert res.returncode != 0 and not res.of("sent"), res.describe()
    text = errors(res)
    if code == 40300:  # QueryRoute passes (Pub or Sub on the topic), the send is refused: the client shows it
        assert "40300" in text and word in text, f"{res.describe()}\n{proxy.log()[before:]}"
    else:
        assert word in proxy.log()[before:], f"{res.describe()}\n{proxy.log()[before:]}"
        status = query_route(proxy, creds)
        assert (status.code, status.message.split("]")[0]) == (code, f"[{word}"), status


def test_a_receive_of_a_group_the_user_may_not_use_gets_nothing(cluster: tuple[Proc, Proc, Proc]) -> None:
    _, _, proxy = cluster
    before = len(proxy.log())
    c = start_driver("rmq5", ["simple-consume", "--endpoints", proxy.addr, "--topic", TOPIC, "--group",
                              unique_name("Gx"), "--count", "1", "--timeout", "15"], env=account(CONSUMER))  # fmt: skip
    sent = produce(proxy, PRODUCER, count=1)
    assert sent.returncode == 0, sent.describe()
    assert c.wait(timeout=60) != 0, c.describe()
    assert not c.of("received"), c.describe()
    assert "NO_PERMISSION" in proxy.log()[before:], proxy.log()[before:]


def test_a_policy_granted_on_the_broker_applies_at_the_proxy(cluster: tuple[Proc, Proc, Proc]) -> None:
    ns, broker, proxy = cluster
    refused = produce(proxy, LATE, count=1)  # no policy at all: even its QueryRoute (Pub or Sub) is refused
    assert refused.returncode != 0 and not refused.of("sent"), refused.describe()
    assert query_route(proxy, LATE).code == pb.FORBIDDEN
    asyncio.run(allow(ns.addr, broker.addr, LATE, (f"Topic:{TOPIC}", ["Pub"])))
    deadline = time.monotonic() + 30
    while True:  # the proxy's refresh (1 s here): wait for the state, one send at a time
        sent = produce(proxy, LATE, count=1)
        if sent.returncode == 0:
            break
        assert time.monotonic() < deadline, f"{sent.describe()}\n{proxy.log()[-3000:]}"
    assert len(sent.of("sent")) == 1, sent.describe()
