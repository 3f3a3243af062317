"""Every ```python block of the README and of the documentation's pages that hold runnable examples (``PAGES``)
runs as printed, against a real ``sievemq dev`` (issue 16.6; issue 27 moved most of them from the README to
``docs/``).

The blocks are found anew on every run, so a section someone adds is checked too; a page of ``docs/`` with a
```python block that is neither in ``PAGES`` nor in ``NOT_RUN`` fails the test, so a block cannot move out of reach.
They run page by page in ``PAGES`` order, each page's blocks in its order, one process each, with their addresses
as printed (``127.0.0.1:9876``, ``10911``, ``8081``): ``sievemq dev`` runs on those default ports inside a network
namespace of this test (only a loopback), so nothing else on the machine is touched. Where namespaces cannot be
made (not root, no iproute2) the tests fail and say so: CI runs as root with iproute2, and no block may pass unrun.

The "Filter server" section's ``sievemq dev --filtersrv 1 ...`` command (docs/filtering.md) runs as printed too, its
module where the page puts it (``/opt/filters``: a folder of the test bound there in a mount namespace of its own),
and the section's client block consumes through it (``test_the_filter_server_command_runs_as_printed``).

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

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = (
    "README.md",
    "docs/clients.md",
    "docs/messaging.md",
    "docs/filtering.md",
    "docs/operations.md",
    "docs/monitoring.md",
    "docs/securing.md",
    "docs/traces.md",
)
"""The documents whose ```python blocks run, in this order (paths from the repository's root)."""
NOT_RUN = {
    "docs/internal/contracts.md": "sketches of the interfaces agreed between the parts of the code base, not programs",
}
"""Pages of docs/ whose ```python blocks are not programs, and why."""
FILTER_SERVER_PAGE = "docs/filtering.md"
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
    """One ```python block: where it starts (its page, the 1-based line of the fence), its code, the markers before
    it."""

    line: int
    code: str
    markers: list[tuple[str, str]] = field(default_factory=list)
    page: str = "README.md"

    @property
    def where(self) -> str:
        """``page line N``, for messages."""
        return f"{self.page} line {self.line}"

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


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The ```python blocks of ``text`` (the document ``page``) with the ``readme-test`` markers on the lines right
    before each."""
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
            out.append(Block(i + 1, "\n".join(lines[i + 1 : end]) + "\n", markers, page))
            i = end
        i += 1
    return out


def _unknown_markers(text: str) -> list[str]:
    return [
        line for line in text.splitlines() if "readme-test" in line and not _MARKER.match(line.strip())
    ]


def page_text(page: str) -> str:
    """The text of a document of ``PAGES`` (a path from the repository's root)."""
    return (REPO / page).read_text(encoding="utf-8")


def pages_with_python_blocks() -> set[str]:
    """The pages of docs/ that hold a ```python block (paths from the repository's root)."""
    return {
        str(path.relative_to(REPO))
        for path in (REPO / "docs").rglob("*.md")
        if any(line.strip() == "```python" for line in path.read_text(encoding="utf-8").splitlines())
    }


BLOCKS = [block for page in PAGES for block in readme_blocks(page_text(page), page)]


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
        pytest.fail(f"the documents' snippets run sievemq dev on its default ports {DEFAULT_PORTS}, which needs a "
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
    """Stop a ``sievemq dev`` started by a snippet test: SIGTERM, SIGKILL after 30 s."""
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
    script = srv.work / f"{Path(block.page).stem.lower().replace('-', '_')}_line_{block.line}.py"
    script.write_text(block.code)
    try:
        return subprocess.run([*srv.prefix, python, script.name], cwd=srv.work, env=srv.env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT)  # fmt: skip
    except subprocess.TimeoutExpired as e:  # its output comes as bytes, text=True or not
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else str(e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else str(e.stderr or "")
        return subprocess.CompletedProcess(e.cmd, -9, out, f"{err}\n[timed out after {BLOCK_TIMEOUT} s]")


# ------------------------------------------------------------------------------------------------ the tests
def test_the_pages_have_python_blocks_and_only_known_markers() -> None:
    assert len(BLOCKS) >= 10, [b.where for b in BLOCKS]
    assert all(readme_blocks(page_text(page)) for page in PAGES), "a page of PAGES without a ```python block"
    for page in PAGES:
        assert not _unknown_markers(page_text(page)), f"{page}: a readme-test marker this test does not understand"


def test_every_page_with_python_blocks_is_run() -> None:
    unlisted = pages_with_python_blocks() - set(PAGES) - set(NOT_RUN)
    assert not unlisted, f"pages with ```python blocks that this test does not run: {sorted(unlisted)}; add to PAGES"
    assert set(NOT_RUN) <= pages_with_python_blocks(), "NOT_RUN names a page without ```python blocks"


def _param(block: Block) -> object:
    marks = [pytest.mark.interop] if block.client else []
    return pytest.param(block, id=f"{block.page}:line{block.line}", marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_readme_python_block_runs_as_printed(server: Env, block: Block) -> None:
    for need in block.marked("needs"):
        assert need in PROVIDED, (
            f"{block.where} needs {need!r}, which this test does not provide ({sorted(PROVIDED)}): provide it here"
        )
    if block.marked("file"):
        py_compile.compile(str(server.work / block.marked("file")[0]), doraise=True)
        return
    if block.client is not None:
        ensure_clients_installed()
    for command in block.marked("run"):
        words = command.split()
        assert words[0] == "sievemq", f"{block.where}: only sievemq commands can be run first"
        res = subprocess.run([*server.prefix, sys.executable, "-m", "sievemq.cli", *words[1:]], cwd=server.work,
                             env=server.env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert res.returncode == 0, f"{block.where}: `{command}` failed:\n{res.stdout}{res.stderr}"
    res = run_block(server, block)
    assert res.returncode == 0, (
        f"{block.where} ({block.client or 'sievemq'}) exited with {res.returncode}\n"
        f"--- stdout\n{res.stdout[-5000:]}\n--- stderr\n{res.stderr[-5000:]}"
    )


def test_a_broken_block_fails(server: Env) -> None:
    """The harness reports a block that raises (so the test above can fail)."""
    res = run_block(server, Block(0, "import sievemq\nraise SystemExit('broken on purpose')\n"))
    assert res.returncode == 1 and "broken on purpose" in res.stderr


# ------------------------------------------------------------------------------------------------ the filter server
def _section(page: str, title: str) -> tuple[int, int]:
    """The lines (1-based, first and last) of ``page``'s section headed ``## title``."""
    lines = page_text(page).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {title}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return start + 1, end


def filter_server_command() -> list[str]:
    """The "Filter server" section's ``sievemq dev --filtersrv ...`` line as its words (the comment left out)."""
    first, last = _section(FILTER_SERVER_PAGE, "Filter server")
    lines = page_text(FILTER_SERVER_PAGE).splitlines()[first - 1 : last]
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
    first, last = _section(FILTER_SERVER_PAGE, "Filter server")
    in_section = [b for b in BLOCKS if b.page == FILTER_SERVER_PAGE and first <= b.line <= last]
    (module,) = [b for b in in_section if b.marked("file")]
    target = paths / module.marked("file")[0]
    assert str(target) in module.code, f"{module.where}: the module says it is {target}"
    (client,) = [b for b in in_section if "Selector.function(" in b.code and not b.markers]
    # The module goes where the page says, in a folder of this test bound over paths' parent in a mount namespace
    # of the command's own: the machine's own folder is not touched.
    outside = paths.parent
    assert outside.is_dir(), f"{outside} (where the page's --filter-paths is) must exist to be bound over"
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
            assert res.returncode == 0, f"{client.where}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
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
