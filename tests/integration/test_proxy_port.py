"""``sievemq proxy`` on a port another proxy holds fails with a clear message (no silent SO_REUSEPORT sharing); calls
beyond ``maxConcurrentCalls`` are refused, not queued without bound."""

from __future__ import annotations

import subprocess
import sys

import grpc
import pytest

from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.proxy.v2 import service_pb2_grpc as rpc
from tests.integration.conftest import Cluster


def test_a_second_proxy_on_a_taken_port_exits_with_the_reason(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    first = cluster.proxy(ns.addr, "proxy-1")
    out = subprocess.run(
        [sys.executable, "-m", "sievemq.cli", "proxy", "--namesrv-addr", ns.addr, "--listen-port", str(first.port)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0, out.stdout
    assert f"cannot listen on 127.0.0.1:{first.port}" in out.stderr, out.stderr


async def test_calls_beyond_max_concurrent_calls_are_refused_and_the_proxy_serves_on(cluster: Cluster) -> None:
    """Each open Telemetry stream is a call; with ``maxConcurrentCalls`` 2, a third call is RESOURCE_EXHAUSTED, and
    once a stream ends the proxy serves again."""
    ns = cluster.namesrv()
    proxy = cluster.proxy(ns.addr, "proxy-limited", "--max-concurrent-calls", "2")
    async with grpc.aio.insecure_channel(proxy.addr) as channel:
        stub = rpc.MessagingServiceStub(channel)
        hello = svc.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER))
        streams = []
        for _ in range(2):
            call = stub.Telemetry(metadata=[("x-mq-client-id", f"c{len(streams)}")])
            await call.write(hello)
            answer = await call.read()
            assert answer.status.code == pb.OK, answer
            streams.append(call)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="T")), timeout=10)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
        await streams[0].done_writing()
        assert await streams[0].read() == grpc.aio.EOF
        answer = await stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")), timeout=10)
        assert answer.status.code == pb.TOPIC_NOT_FOUND, answer
        streams[1].cancel()
