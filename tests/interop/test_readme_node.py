"""The ```js blocks of the "RocketMQ 5.x clients" section (docs/clients.md, the README's until issue 27) run as
printed with the real Node.js 5.x client (rocketmq-client-nodejs 1.0.8 from the interop install) against a real
``sievemq dev``: the Node.js twin of tests/integration/test_readme.py, which runs the ```python blocks.

The blocks are found anew on every run. They use the addresses as printed (the proxy of ``sievemq dev`` on
``127.0.0.1:8081``): ``sievemq dev`` runs on its default ports inside a network namespace of this test (only a
loopback), so nothing else on the machine is touched; where no namespace can be made (not root, no iproute2) the
test fails and says so. The topics a block's Producer
names (``topics: [ ... ]``) are created first, as the section says they must be. A block passes when it exits 0
and prints back every body it sends (``Buffer.from('...')``): it received what it sent."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.test_readme import DEFAULT_PORTS, REPO, _stop, _wait_log
from tests.interop.clients import interop_dir, node_bin
from tests.support.netns import NoNamespaces, loopback_only

pytestmark = pytest.mark.interop

PAGE = REPO / "docs" / "clients.md"
SECTION = "## RocketMQ 5.x clients"
BLOCK_TIMEOUT = 120.0


@dataclass(frozen=True)
class JsBlock:
    """One ```js block: the 1-based line of its fence and its code."""

    line: int
    code: str


def section_js_blocks(text: str, heading: str = SECTION) -> list[JsBlock]:
    """The ```js (or ```javascript) blocks between ``heading`` and the next heading of its level."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    level = heading.split()[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].split(" ", 1)[0] == level), len(lines))
    out: list[JsBlock] = []
    i = start + 1
    while i < end:
        if lines[i].strip() in ("```js", "```javascript"):
            close = next(k for k in range(i + 1, end) if lines[k].strip() == "```")
            out.append(JsBlock(i + 1, "\n".join(lines[i + 1 : close]) + "\n"))
            i = close
        i += 1
    return out


def producer_topics(code: str) -> list[str]:
    """The topics a block's Producer names in its ``topics: [ ... ]`` option."""
    return [t for group in re.findall(r"topics:\s*\[([^\]]*)\]", code) for t in re.findall(r"'([^']+)'", group)]


def sent_bodies(code: str) -> list[str]:
    """The bodies a block sends, as ``Buffer.from('...')`` literals."""
    return re.findall(r"Buffer\.from\('([^']*)'\)", code)


BLOCKS = section_js_blocks(PAGE.read_text(encoding="utf-8"))


@dataclass
class Server:
    prefix: list[str]
    """Runs a command inside the test's network namespace."""
    work: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def namespace() -> Iterator[list[str]]:
    """A command prefix running inside a fresh network namespace with only its loopback, removed at the end."""
    stack = contextlib.ExitStack()
    try:
        prefix = stack.enter_context(loopback_only("rj"))
    except NoNamespaces as e:
        pytest.fail(f"the page's block uses sievemq dev's default ports {DEFAULT_PORTS}, which needs a network "
                    f"namespace of this test's own, and none can be made here: {e}", pytrace=False)  # fmt: skip
    with stack:
        yield prefix


@pytest.fixture(scope="module")
def server(namespace: list[str], tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Server]:
    """``sievemq dev`` on its default ports (its proxy on 8081)."""
    tmp = tmp_path_factory.mktemp("readme-node")
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1",
               NODE_PATH=str(interop_dir() / "node-rmq5" / "node_modules"))  # fmt: skip
    log = tmp / "dev.log"
    with open(log, "wb") as out:
        dev = [*namespace, sys.executable, "-m", "sievemq.cli", "dev", "--data", str(tmp / "data")]
        proc = subprocess.Popen(dev, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp, start_new_session=True)
    try:
        _wait_log(log, "Press Ctrl-C to stop.", proc)
        assert "127.0.0.1:8081" in log.read_text(), f"sievemq dev does not serve gRPC on 8081:\n{log.read_text()}"
        yield Server(namespace, work, env)
    finally:
        _stop(proc)


def run_js(srv: Server, block: JsBlock) -> subprocess.CompletedProcess[str]:
    """Run ``block`` as a program with node in the server's namespace (the client found through NODE_PATH)."""
    script = srv.work / f"readme_line_{block.line}.js"
    script.write_text(block.code)
    try:
        return subprocess.run([*srv.prefix, node_bin(), script.name], cwd=srv.work, env=srv.env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else str(e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else str(e.stderr or "")
        return subprocess.CompletedProcess(e.cmd, -9, out, f"{err}\n[timed out after {BLOCK_TIMEOUT} s]")


def test_the_section_has_a_js_block_that_sends_to_a_topic() -> None:
    assert BLOCKS, f"no ```js block in the {SECTION!r} section of {PAGE.name}"
    assert all(producer_topics(b.code) and sent_bodies(b.code) for b in BLOCKS), [b.line for b in BLOCKS]


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{b.line}" for b in BLOCKS])
def test_readme_js_block_runs_as_printed(server: Server, block: JsBlock) -> None:
    for topic in producer_topics(block.code):
        res = subprocess.run([*server.prefix, sys.executable, "-m", "sievemq.cli", "topic", "create", topic, "-n",
                              "127.0.0.1:9876"], cwd=server.work, env=server.env, capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        assert res.returncode == 0, f"`sievemq topic create {topic}` failed:\n{res.stdout}{res.stderr}"
    res = run_js(server, block)
    why = f"{PAGE.name} line {block.line} exited with {res.returncode}\n--- stdout\n{res.stdout[-5000:]}\n"
    why += f"--- stderr\n{res.stderr[-5000:]}"
    assert res.returncode == 0, why
    printed = res.stdout.splitlines()
    for body in sent_bodies(block.code):
        assert any(body in line for line in printed), f"the block did not print back what it sent ({body!r}):\n{why}"


def test_a_broken_js_block_fails(server: Server) -> None:
    """The harness reports a block that throws (so the test above can fail)."""
    res = run_js(server, JsBlock(0, "require('rocketmq-client-nodejs');\nthrow new Error('broken on purpose');\n"))
    assert res.returncode == 1 and "broken on purpose" in res.stderr, res
