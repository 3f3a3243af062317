"""Fixtures of the dashboard's tests: one real ``sievemq dev`` per test module (its HTTP port serves the
dashboard) with the sample data of ``sample.py`` loaded, and a small HTTP client for the JSON API."""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from tests.dashboard import sample
from tests.integration.conftest import _CLUSTER_KEY, Cluster
from tests.support.procs import Proc, dev_proc


@dataclass
class Answer:
    """An HTTP answer of the dashboard."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON."""
        return orjson.loads(self.body)


def get(url: str, headers: dict[str, str] | None = None) -> Answer:
    """GET ``url`` (any status is an answer)."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return Answer(resp.status, dict(resp.headers.items()), resp.read())
    except urllib.error.HTTPError as e:
        return Answer(e.code, dict(e.headers.items()), e.read())


class Loop:
    """An event loop in a thread: the sample's consumer keeps running while the test's own code is synchronous."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 120.0) -> Any:
        """Run ``coro`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        """Stop the loop."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class Board:
    """The running dev, its dashboard's URL, and the sample loaded on it."""

    dev: Proc
    url: str
    namesrv: str
    sample: sample.Sample
    loop: Loop

    def api(self, path: str, token: str | None = None, **headers: str) -> Answer:
        """GET ``/api/<path>`` (with ``token``: as the user of that bearer token)."""
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return get(f"{self.url}/api/{path}", headers)


@pytest.fixture(scope="module")
def board(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    """``sievemq dev`` with its dashboard and the sample data, for the whole module; a module's ``DEV_ENV`` (a
    dict, e.g. ``SIEVEMQ_DASHBOARD_REFRESH_SECONDS``, or a function of the module's temporary folder giving one)
    is added to the process's environment."""
    tmp = tmp_path_factory.mktemp("dashboard-dev")
    proc = dev_proc(tmp)
    env = getattr(request.module, "DEV_ENV", {})
    proc.env.update(env(tmp) if callable(env) else env)
    proc.start()
    loop = Loop()
    try:
        namesrv = str(proc.extra["namesrv"])
        data = loop.run(sample.load(namesrv))
        try:
            yield Board(proc, str(proc.extra["http"]), namesrv, data, loop)
        finally:
            loop.run(data.close())
    finally:
        loop.close()
        proc.stop(timeout=10.0)


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> None:
    """A failed test that uses ``board`` gets the tail of the module's ``sievemq dev`` log (tests/integration/
    conftest.py's hook)."""
    if "board" not in request.fixturenames:
        return
    board: Board = request.getfixturevalue("board")
    holder = Cluster(board.dev.log_path.parent)
    holder.procs.append(board.dev)
    request.node.stash[_CLUSTER_KEY] = holder


from tests.integration.conftest import pytest_runtest_makereport  # noqa: E402, F401  (process logs on failure)


def ok(a: Answer) -> dict:  # type: ignore[type-arg]
    """The JSON object of a 200 answer."""
    assert a.status == 200, f"status {a.status}: {a.body[:2000]!r}"
    body = a.json()
    assert isinstance(body, dict)
    return body


def refused(a: Answer, status: int, reason: str) -> dict:  # type: ignore[type-arg]
    """The error object of a refusal with ``status`` and ``reason`` (never a traceback)."""
    assert a.status == status, f"status {a.status}, not {status}: {a.body[:2000]!r}"
    err = a.json()["error"]
    assert err["reason"] == reason, f"reason {err['reason']}, not {reason}: {err}"
    assert err["status"] == status and err["message"]
    assert b"Traceback" not in a.body
    return err
