"""Every ```python block of the README runs as printed, against a real ``sievemq dev`` (issue 16.6).

The blocks are found anew on every run, so a section someone adds is checked too. They run in README order, one
process each, with their addresses as printed (``127.0.0.1:9876``, ``10911``, ``8081``): ``sievemq dev`` runs on
those default ports inside a network namespace of this test (only a loopback), so nothing else on the machine is
touched. Where namespaces cannot be made (not root, no iproute2) the tests fail and say so: CI runs as root with
iproute2, and no README block may pass unrun.

The "Filter server" section's ``sievemq dev --filtersrv 1 ...`` command runs as printed too, its module where the
README puts it (``/opt/filters``: a folder of the test bound there in a mount namespace of its own), and the
section's client block consumes through it (``test_the_filter_server_command_runs_as_printed``).

Blocks that import RocketMQ's clients run with that client's interpreter from the interop install
(``rocketmq.client``: the C++ core, rocketmq-client-python; ``rocketmq``: the 5.x client). What else a block needs
is declared by an HTML comment right before it, one of:

- ``<!-- readme-test: file PATH -->``: the block is a module, written to PATH in the folder the filter servers
  import from (``--filter-paths``) and checked to compile;
- ``<!-- readme-test: run sievemq ARGS -->``: a command to run before the block;
- ``<!-- readme-test: needs NAME -->``: a setting of the test's server, one of ``PROVIDED``.

There is no marker to leave a block out: a block that cannot run here is a failure to fix, not a skip.
"""

from __future__ import annotations

import ast
import contextlib
import os
import py_compile
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.interop.clients import ensure_clients_installed, interop_dir
from tests.support.netns import NoNamespaces, loopback_only

README = Path(__file__).resolve().parents[2] / "README.md"
DEFAULT_PORTS = (9876, 10911, 8081)
BLOCK_TIMEOUT = 120.0
UPLOAD_ACCOUNT, UPLOAD_SECRET = "shop-team", "readme-upload-secret"
PROVIDED = {
    "uploads": f"filter servers that take uploaded functions from account {UPLOAD_ACCOUNT} "
    "(secret in $SHOP_FILTER_SECRET)",
}
"""What the test's ``sievemq dev`` is set up with, for ``needs`` markers."""
INTERPRETERS = {"rmqcp": "venv-rmqcp", "rmq5": "venv-rmq5"}
_MARKER = re.compile(r"^<!--\s*readme-test:\s*(file|run|needs)\s+(.*?)\s*-->$")


@dataclass
class Block:
    """One ```python block: where it starts (1-based line of the fence), its code, the markers before it."""

    line: int
    code: str
    markers: list[tuple[str, str]] = field(default_factory=list)

    def marked(self, kind: str) -> list[str]:
        return [v for k, v in self.markers if k == kind]

    @property
    def client(self) -> str | None:
        """The third-party client whose interpreter runs the block (None: sievemq's)."""
        if re.search(r"^\s*(from|import)\s+rocketmq\.client\b", self.code, re.M):
            return "rmqcp"
        if re.search(r"^\s*(from|import)\s+rocketmq\b", self.code, re.M):
            return "rmq5"
        return None


def readme_blocks(text: str) -> list[Block]:
    """The ```python blocks of ``text`` with the ``readme-test`` markers on the lines right before each."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            markers: list[tuple[str, str]] = []
            j = i - 1
            while j >= 0 and (m := _MARKER.match(lines[j].strip())):
                markers.insert(0, (m.group(1), m.group(2)))
                j -= 1
            end = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "```")
            out.append(Block(i + 1, "\n".join(lines[i + 1 : end]) + "\n", markers))
            i = end
        i += 1
    return out


def _unknown_markers(text: str) -> list[str]:
    return [
        line for line in text.splitlines() if "readme-test" in line and not _MARKER.match(line.strip())
    ]


BLOCKS = readme_blocks(README.read_text())


# ------------------------------------------------------------------------------------------------ the server
@dataclass
class Env:
    prefix: list[str]
    """Runs a command inside the test's network namespace ([] on the machine's loopback)."""
    work: Path
    """The blocks' working folder; also the filter servers' --filter-paths."""
    env: dict[str, str]


@contextlib.contextmanager
def own_loopback(label: str) -> Iterator[list[str]]:
    """``loopback_only``, failing the test with the reason when no namespace can be made."""
    stack = contextlib.ExitStack()
    try:
        prefix = stack.enter_context(loopback_only(label))
    except NoNamespaces as e:
        pytest.fail(f"the README's commands run sievemq dev on its default ports {DEFAULT_PORTS}, which needs a "
                    f"network namespace of this test's own, and none can be made here: {e}. Run the tests as root "
                    "with iproute2 (ip) installed, as CI does.")  # fmt: skip
    with stack:
        yield prefix


@pytest.fixture(scope="module")
def namespace() -> Iterator[list[str]]:
    """A command prefix running inside a fresh network namespace with only its loopback, removed at the end."""
    with own_loopback("rd") as prefix:
        yield prefix


def _wait_log(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text.encode() not in log.read_bytes():
        assert proc.poll() is None, f"sievemq dev exited with {proc.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"sievemq dev did not log {text!r} within {timeout} s:\n{log.read_text()}"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a ``sievemq dev`` started by a README test: SIGTERM, SIGKILL after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server(namespace: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """``sievemq dev`` on its default ports, with a filter server allowed ``shop.filters`` (from the blocks' folder)
    and uploads from ``UPLOAD_ACCOUNT``."""
    tmp = tmp_path_factory.mktemp("readme")
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir()
    for block in BLOCKS:
        for path in block.marked("file"):
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(block.code)
    (tmp / "filtersrv.toml").write_text(
        f'clientUploadFilterEnable = true\nuploadAccounts = "{UPLOAD_ACCOUNT}"\nuploadSecret = "{UPLOAD_SECRET}"\n'
        'sandboxRequire = "basic"\n'
    )
    (tmp / "broker.toml").write_text(f'filterServerConfig = "{tmp / "filtersrv.toml"}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1", SHOP_FILTER_SECRET=UPLOAD_SECRET)
    log = tmp / "dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*namespace, sys.executable, "-m", "sievemq.cli", "dev", "--data", str(tmp / "data"), "--config",
             str(tmp / "broker.toml"), "--filter-modules", "shop.filters", "--filter-paths", str(work)],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp, start_new_session=True,
        )  # fmt: skip
    try:
        _wait_log(log, "Press Ctrl-C to stop.", proc)
        _wait_log(log, "filter server 127.0.0.1:", proc)  # registered with the broker: in the routes from now on
        yield Env(namespace, work, env)
    finally:
        _stop(proc)


def run_block(srv: Env, block: Block) -> subprocess.CompletedProcess[str]:
    """Run ``block`` as a program in the server's namespace with the interpreter its imports ask for."""
    python = sys.executable
    if block.client is not None:
        python = str(interop_dir() / INTERPRETERS[block.client] / "bin" / "python")
    script = srv.work / f"readme_line_{block.line}.py"
    script.write_text(block.code)
    try:
        return subprocess.run([*srv.prefix, python, script.name], cwd=srv.work, env=srv.env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(e.cmd, -9, str(e.stdout or ""), f"{e.stderr or ''}\n[timed out]")


# ------------------------------------------------------------------------------------------------ the tests
def test_the_readme_has_python_blocks_and_only_known_markers() -> None:
    assert len(BLOCKS) >= 10, [b.line for b in BLOCKS]
    assert not _unknown_markers(README.read_text()), "a readme-test marker this test does not understand"


def _param(block: Block) -> object:
    marks = [pytest.mark.interop] if block.client else []
    return pytest.param(block, id=f"line{block.line}", marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_readme_python_block_runs_as_printed(server: Env, block: Block) -> None:
    for need in block.marked("needs"):
        assert need in PROVIDED, (
            f"README line {block.line} needs {need!r}, which this test does not provide ({sorted(PROVIDED)}): "
            "provide it here, or mark the block with readme-test: skip and the reason"
        )
    if block.marked("file"):
        py_compile.compile(str(server.work / block.marked("file")[0]), doraise=True)
        return
    if block.client is not None:
        ensure_clients_installed()
    for command in block.marked("run"):
        words = command.split()
        assert words[0] == "sievemq", f"README line {block.line}: only sievemq commands can be run first"
        res = subprocess.run([*server.prefix, sys.executable, "-m", "sievemq.cli", *words[1:]], cwd=server.work,
                             env=server.env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert res.returncode == 0, f"README line {block.line}: `{command}` failed:\n{res.stdout}{res.stderr}"
    res = run_block(server, block)
    assert res.returncode == 0, (
        f"README line {block.line} ({block.client or 'sievemq'}) exited with {res.returncode}\n"
        f"--- stdout\n{res.stdout[-5000:]}\n--- stderr\n{res.stderr[-5000:]}"
    )


def test_a_broken_block_fails(server: Env) -> None:
    """The harness reports a block that raises (so the test above can fail)."""
    res = run_block(server, Block(0, "import sievemq\nraise SystemExit('broken on purpose')\n"))
    assert res.returncode == 1 and "broken on purpose" in res.stderr


# ------------------------------------------------------------------------------------------------ the filter server
def _section(title: str) -> tuple[int, int]:
    """The README's lines (1-based, first and last) of the section headed ``## title``."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {title}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return start + 1, end


def filter_server_command() -> list[str]:
    """The "Filter server" section's ``sievemq dev --filtersrv ...`` line as its words (the comment left out)."""
    first, last = _section("Filter server")
    lines = README.read_text().splitlines()[first - 1 : last]
    (line,) = [x for x in lines if x.startswith("sievemq dev --filtersrv")]
    return shlex.split(line, comments=True)


def _sievemq() -> list[str]:
    """The ``sievemq`` command of this interpreter's environment."""
    script = Path(sys.executable).parent / "sievemq"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sievemq.cli"]


def test_the_filter_server_command_runs_as_printed(tmp_path: Path) -> None:
    command = filter_server_command()
    assert command[:2] == ["sievemq", "dev"] and "--filtersrv" in command, command
    paths = Path(command[command.index("--filter-paths") + 1])
    first, last = _section("Filter server")
    in_section = [b for b in BLOCKS if first <= b.line <= last]
    (module,) = [b for b in in_section if b.marked("file")]
    target = paths / module.marked("file")[0]
    assert str(target) in module.code, f"the README's module says it is {target}"
    (client,) = [b for b in in_section if "Selector.function(" in b.code and not b.markers]
    # The module goes where the README says, in a folder of this test bound over paths' parent in a mount namespace
    # of the command's own: the machine's own folder is not touched.
    outside = paths.parent
    assert outside.is_dir(), f"{outside} (where the README's --filter-paths is) must exist to be bound over"
    bound = tmp_path / "bound"
    (bound / target.relative_to(outside)).parent.mkdir(parents=True)
    (bound / target.relative_to(outside)).write_text(module.code)
    run, home = tmp_path / "run", tmp_path / "home"
    run.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1")
    log = tmp_path / "dev.log"
    mount = ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount --bind "$1" "$2" && shift 2 && '
             'exec "$@"', "sh", str(bound), str(outside)]  # fmt: skip
    with own_loopback("rf") as prefix, open(log, "wb") as out:
        proc = subprocess.Popen([*prefix, *mount, *_sievemq(), *command[1:]], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=run, start_new_session=True)  # fmt: skip
        try:
            _wait_log(log, "Press Ctrl-C to stop.", proc)
            _wait_log(log, "filter server 127.0.0.1:", proc)  # registered with the broker: in the routes from now on
            made = subprocess.run([*prefix, *_sievemq(), "topic", "create", "orders"], env=env, cwd=run,
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
            assert made.returncode == 0, made.stderr
            res = run_block(Env(prefix, run, env), client)
            assert res.returncode == 0, f"README line {client.line}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            printed = [body for line in res.stdout.splitlines() if line.startswith("[b")
                       for body in ast.literal_eval(line)]  # fmt: skip
            assert printed == [b'{"region": "eu", "total": 250}'], f"only the big EU order: {res.stdout}"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    assert "stopped cleanly" in log.read_text(), log.read_text()[-3000:]
