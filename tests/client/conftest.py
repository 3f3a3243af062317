"""Fixtures for the client tests: one real ``sievemq dev`` per test module (always stopped), and helpers.

Tests share the module's process, so each test uses its own topic and group names (``names``).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sievemq import ConsumeResult, MessageExt, PushConsumer
from tests.support.procs import Proc, attach_process_logs, dev_proc
from tests.support.wire import wait_routed

T = TypeVar("T")
LOG_TAIL_CHARS = 15_000
_PROCS_KEY = pytest.StashKey[list[Proc]]()
_counter = itertools.count(1)


def start_dev(tmp: Path, *extra: str) -> Proc:
    """Start ``sievemq dev`` in ``tmp``."""
    return dev_proc(tmp, *extra).start()


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Proc]:
    """One ``sievemq dev`` for the whole module."""
    proc = start_dev(tmp_path_factory.mktemp("dev"))
    request.module.__dict__.setdefault("_client_test_procs", []).append(proc)
    try:
        yield proc
    finally:
        proc.stop(timeout=10.0)


@pytest.fixture
def namesrv(dev: Proc) -> str:
    """The name server address of the module's ``sievemq dev``."""
    return str(dev.extra["namesrv"])


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``names("topic")`` -> a name unique to this test (letters, digits, '-', '_' only)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name.removeprefix("test_"))[:60]
    n = next(_counter)

    def make(kind: str) -> str:
        return f"{kind}-{base}-{n}"

    return make


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the tail of the module's broker log to failed tests."""
    rep = yield
    if rep.failed:
        module = getattr(item, "module", None)
        attach_process_logs(rep, getattr(module, "_client_test_procs", []) if module else [], LOG_TAIL_CHARS)
    return rep


async def eventually(
    probe: Callable[[], T | Awaitable[T]], timeout: float = 10.0, interval: float = 0.05, what: str = "condition"
) -> T:
    """Call ``probe`` until it returns something truthy; fail at the deadline with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        value = probe()
        if asyncio.iscoroutine(value) or isinstance(value, Awaitable):
            value = await value
        last = value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout}s; last value: {last!r}")
        await asyncio.sleep(interval)


class Collector:
    """A push listener that records what it got (and can fail on demand)."""

    def __init__(self, fail: Callable[[MessageExt], bool] | None = None) -> None:
        self.msgs: list[MessageExt] = []
        self.calls = 0
        self.fail = fail
        self.arrived = asyncio.Event()

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        self.calls += 1
        self.msgs.extend(msgs)
        self.arrived.set()
        if self.fail is not None and any(self.fail(m) for m in msgs):
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    def bodies(self) -> list[bytes]:
        """Bodies received, in arrival order."""
        return [m.body for m in self.msgs]


def collecting(consumer: PushConsumer, fail: Callable[[MessageExt], bool] | None = None) -> Collector:
    """Register a Collector as ``consumer``'s listener."""
    c = Collector(fail)

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        return await c(msgs)

    consumer.listener(listener)
    return c


async def ready(consumer: PushConsumer, topic: str, queues: int | None = None, timeout: float = 10.0) -> None:
    """Wait until ``consumer`` owns queues of ``topic`` (exactly ``queues`` of them when given)."""

    def owned() -> bool:
        n = sum(1 for mq in consumer.assignment() if mq.topic == topic)
        return n == queues if queues is not None else n > 0

    await eventually(owned, timeout, what=f"{consumer.group} owns queues of {topic}")


async def routed(namesrv: str, topic: str, timeout: float = 10.0) -> None:
    """Wait until the name server publishes a route for ``topic``."""
    await wait_routed(namesrv, [topic], timeout)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Client tests take seconds; a hang fails after 60 s instead of the suite's 300 s."""
    for item in items:
        if "tests/client/" in str(item.path) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(60))
