"""A 5.x client that writes Telemetry settings and never reads the answers is not read further once its stream's
backlog is full (``service.TELEMETRY_BACKLOG``): the proxy's memory for it stays bounded, and gRPC's flow control
holds the client back. Driven without sockets: the service's handler gets a request iterator that counts what the
proxy took from it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from sievemq.client.producer import Producer
from sievemq.proxy.config import ProxyConfig
from sievemq.proxy.service import TELEMETRY_BACKLOG, MessagingService
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc


class _Context:
    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", "greedy-client")]


async def _settings_forever(taken: list[int]) -> AsyncIterator[svc.TelemetryCommand]:
    settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")]))
    while True:
        taken[0] += 1
        yield svc.TelemetryCommand(settings=settings)
        await asyncio.sleep(0)


async def test_a_client_that_never_reads_its_answers_is_not_read_further() -> None:
    service = MessagingService(ProxyConfig(), Producer(["127.0.0.1:1"], "unused"), ("127.0.0.1", 8081))
    taken = [0]
    answers: Any = service.Telemetry(_settings_forever(taken), _Context())
    first = await answers.__anext__()  # the client reads one answer, then no more
    assert first.status.code == pb.OK and first.settings.publishing.max_body_size == ProxyConfig().max_body_size
    for _ in range(200):
        await asyncio.sleep(0)
    assert taken[0] <= TELEMETRY_BACKLOG + 3, f"the proxy read {taken[0]} commands of a client that reads nothing"
    more = [await answers.__anext__() for _ in range(TELEMETRY_BACKLOG)]  # reading again lets it go on
    assert all(a.status.code == pb.OK for a in more)
    for _ in range(200):
        await asyncio.sleep(0)
    assert taken[0] > TELEMETRY_BACKLOG + 3
    await answers.aclose()
    assert "greedy-client" not in service.transactions.streams, "the stream's end detaches it"
