"""Helpers to run the real third-party RocketMQ clients from pytest.

The client kinds, each driven by a small program in ``tests/interop/drivers/`` that prints one JSON object per
line on stdout:

=========  ==============================  =====================================  ==============================
kind       client                          runs with                              driver
=========  ==============================  =====================================  ==============================
rmqcp      rocketmq-client-python 0.5.0rc2  ``.interop/venv-rmqcp/bin/python``    ``drivers/rmqcp_driver.py``
rmq044     rocketmq 0.4.4                   ``.interop/venv-rmq044/bin/python``   ``drivers/rmq044_driver.py``
ons        ali-ons 3.12.0 (npm)             ``node``                              ``drivers/ons_driver.js``
rmq5       rocketmq-python-client 5.1.2     ``.interop/venv-rmq5/bin/python``     ``drivers/rmq5_driver.py``
rmq5-node  rocketmq-client-nodejs 1.0.8     ``node``                              ``drivers/rmq5_node_driver.js``
java4      rocketmq-client 4.9.8 (Java)     ``java`` (``.interop/java-rocketmq-``  ``drivers/java`` (Driver.java)
java5      rocketmq-client 5.5.0 (Java)     ``client-VERSION``: jar, lib, CDS)     the same source, 5.x's jars
go         rocketmq-client-go/v2 (Go)       ``.interop/go-rocketmq-client-V/``     ``drivers/go`` (main.go...)
=========  ==============================  =====================================  ==============================

The two 5.x gRPC kinds (rmq5, rmq5-node) speak to sievemq's proxy (``--endpoints``) instead of the 4.x protocol to a
name server. ``java5`` is the 4.x remoting API of the 5.x line (``DefaultMQProducer``, ``DefaultMQPushConsumer``...),
not the gRPC client; the Java driver's commands are listed in its usage text (``produce``, ``consume``,
``lite-pull``, ``transaction``, ``request``, ``stream``: one send every ``--interval-ms`` until stopped, each result
timestamped, for the failover tests) and its extra events in tests/interop/test_java_clients.py.

Typical use::

    from tests.interop.clients import ensure_clients_installed, run_driver, start_driver, unique_name

    def test_roundtrip(broker):                      # the broker fixture gives the name server address
        ensure_clients_installed()                   # fails (never skips) with the installer's output
        topic, group = unique_name("T"), unique_name("G")
        with start_driver("ons", ["consume", "--namesrv", broker.namesrv, "--topic", topic, "--group", group,
                                  "--expr", "TagA || TagB", "--expect", "2", "--timeout", "60",
                                  "--from", "first"]) as consumer:
            consumer.wait_for("started", timeout=30)
            sent = run_driver("rmqcp", ["produce", "--namesrv", broker.namesrv, "--topic", topic, "--group",
                                        unique_name("P"), "--count", "3", "--tags", "TagA,TagB,TagC"])
            assert sent.returncode == 0, sent.describe()
            assert consumer.wait(timeout=90) == 0, consumer.describe()
        got = consumer.result().of("received")

Every event is a dict with an ``"event"`` key: ``started``, ``sent``, ``received``, ``rejected``, ``error``,
``client_error`` (ali-ons only, non-fatal), ``timeout``, ``done``. Driver exit codes: 0 ok, 1 send/start failure,
2 usage/import error, 3 consume timeout, 4 driver watchdog (the client hung).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
DRIVERS_DIR = HERE / "drivers"
SETUP_SCRIPT = HERE / "setup_clients.sh"
KINDS = ("rmqcp", "rmq044", "ons", "rmqcp-tx", "rmq5", "rmq5-node", "java4", "java5", "go")

_DRIVER_FILES = {
    "rmqcp": DRIVERS_DIR / "rmqcp_driver.py",
    "rmq044": DRIVERS_DIR / "rmq044_driver.py",
    "ons": DRIVERS_DIR / "ons_driver.js",
    "rmqcp-tx": DRIVERS_DIR / "rmqcp_tx_driver.py",  # TransactionMQProducer of the same client
    "rmq5": DRIVERS_DIR / "rmq5_driver.py",  # the 5.x gRPC client, through sievemq's proxy
    "rmq5-node": DRIVERS_DIR / "rmq5_node_driver.js",  # the Node.js 5.x gRPC client (.interop/node-rmq5)
}
_NODE_KINDS = ("ons", "rmq5-node")
JAVA_VERSIONS = {"java4": "4.9.8", "java5": "5.5.0"}
"""Apache RocketMQ's Java remoting client (rocketmq-client) of each Java kind (tests/interop/setup_java_clients.sh)."""
JAVA_OPTIONS = ["-Xms32m", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
                "-Djava.net.preferIPv4Stack=true"]  # fmt: skip
"""A small, quick-starting JVM; setup_java_clients.sh makes its class-data-sharing archive with these options."""
_VENVS = {"rmqcp": "venv-rmqcp", "rmq044": "venv-rmq044", "rmqcp-tx": "venv-rmqcp", "rmq5": "venv-rmq5"}


def interop_dir() -> Path:
    """Where setup_clients.sh installs the clients (``$INTEROP_DIR`` or ``<repo>/.interop``)."""
    return Path(os.environ.get("INTEROP_DIR") or (REPO_ROOT / ".interop")).resolve()


# ------------------------------------------------------------------------------------------- errors


class ClientsInstallError(RuntimeError):
    """setup_clients.sh failed; the message carries its output."""


class DriverTimeout(AssertionError):
    """A driver did not produce what was waited for (or did not exit) in time."""


# ----------------------------------------------------------------------------------------- install

_install_lock = threading.Lock()
_install_state: dict[str, Any] = {"done": False, "error": None, "output": ""}


def _fail(msg: str) -> None:
    try:
        import pytest
    except ImportError:  # pragma: no cover - outside pytest
        raise ClientsInstallError(msg) from None
    pytest.fail(msg, pytrace=False)


def ensure_clients_installed(*, force: bool = False, timeout: float = 1500.0) -> Path:
    """Run ``setup_clients.sh`` once per process (it is idempotent and takes a file lock, so parallel workers
    are fine). On failure the calling test FAILS (``pytest.fail``) with the script's output; it never skips.
    Returns the install directory."""
    with _install_lock:
        if _install_state["done"] and not force:
            return interop_dir()
        if _install_state["error"] is not None and not force:
            _fail(_install_state["error"])
        cmd = ["bash", str(SETUP_SCRIPT)]
        env = dict(os.environ)
        env["INTEROP_DIR"] = str(interop_dir())
        try:
            proc = subprocess.run(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                timeout=timeout,
                text=True,
                errors="replace",
                check=False,
            )
            output, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
            output, code = out + f"\n[timed out after {timeout}s]", -1
        except OSError as exc:
            output, code = f"could not run {cmd}: {exc}", -1
        _install_state["output"] = output
        if code != 0:
            msg = (
                f"interop client installation failed (exit {code}): {' '.join(cmd)}\n"
                f"---- output ----\n{output[-20000:]}"
            )
            _install_state["error"] = msg
            _fail(msg)
        _install_state["done"] = True
        _install_state["error"] = None
        return interop_dir()


def install_output() -> str:
    """Output of the last setup_clients.sh run in this process."""
    return str(_install_state["output"])


# -------------------------------------------------------------------------------------- executables


def python_for(kind: str) -> Path:
    """Interpreter of the venv holding the client ``kind`` ('rmqcp', 'rmq044', or 'rmq5': the 5.x gRPC client)."""
    if kind not in _VENVS:
        raise ValueError(f"{kind!r} is not a Python client kind ({', '.join(_VENVS)})")
    return interop_dir() / _VENVS[kind] / "bin" / "python"


def node_bin() -> str:
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise FileNotFoundError("node not found on PATH; run tests/interop/setup_clients.sh")
    return node


GO_MOD = DRIVERS_DIR / "go" / "go.mod"


def go_client_version() -> str:
    """The rocketmq-client-go version the Go driver's go.mod requires (setup_go_clients.sh builds against it)."""
    m = re.search(r"^require github\.com/apache/rocketmq-client-go/v2 (\S+)", GO_MOD.read_text(), re.M)
    assert m, f"no rocketmq-client-go requirement in {GO_MOD}"
    return m.group(1)


def go_driver() -> Path:
    """The Go driver's binary (tests/interop/setup_go_clients.sh builds it)."""
    return interop_dir() / f"go-rocketmq-client-{go_client_version()}" / "driver"


def java_client_dir(kind: str) -> Path:
    """Where setup_java_clients.sh built the Java driver of ``kind`` ('java4' or 'java5')."""
    return interop_dir() / f"java-rocketmq-client-{JAVA_VERSIONS[kind]}"


def java_command(kind: str) -> list[str]:
    """``java ... io.sievemq.interop.Driver`` on the classpath of ``kind``'s client only (its driver.jar and lib/)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")
    d = java_client_dir(kind)
    cds = [f"-XX:SharedArchiveFile={d / 'driver.jsa'}", "-Xshare:auto"] if (d / "driver.jsa").exists() else []
    return [java, *JAVA_OPTIONS, *cds, "-cp", f"{d / 'driver.jar'}:{d / 'lib'}/*", "io.sievemq.interop.Driver"]


def driver_command(kind: str, args: Sequence[str]) -> list[str]:
    if kind not in KINDS:
        raise ValueError(f"unknown client kind {kind!r}; expected one of {KINDS}")
    if kind in JAVA_VERSIONS:
        return [*java_command(kind), *[str(a) for a in args]]
    if kind == "go":
        return [str(go_driver()), *[str(a) for a in args]]
    script = str(_DRIVER_FILES[kind])
    exe = node_bin() if kind in _NODE_KINDS else str(python_for(kind))
    return [exe, script, *[str(a) for a in args]]


_log_counter = [0]
_log_counter_lock = threading.Lock()


def new_log_dir(kind: str) -> Path:
    """A fresh directory for one driver run; the C++ clients write ``logs/rocketmq-cpp/*.log`` in it."""
    base = Path(os.environ.get("INTEROP_LOG_DIR") or (interop_dir() / "logs"))
    with _log_counter_lock:
        _log_counter[0] += 1
        n = _log_counter[0]
    d = base / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{n:03d}-{kind}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def driver_env(kind: str, log_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # The C++ core logs to $HOME/logs/rocketmq-cpp/ and keeps broadcast offsets in $HOME/.rocketmq_offsets/; the
    # Node.js 5.x client's push-consumer internals log to $HOME/logs/rocketmq/ whatever logger they are given.
    # The Go client keeps broadcasting offsets under $HOME/.rocketmq_client_go: each run has its own.
    if kind in _VENVS or kind in ("rmq5-node", "go"):
        env["HOME"] = str(log_dir)
    env["INTEROP_DIR"] = str(interop_dir())
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop("PYTHONPATH", None)  # the drivers must see only their own venv
    if extra:
        env.update(extra)
    return env


def unique_name(prefix: str = "it") -> str:
    """A topic/group name unlikely to collide across tests (letters, digits, '_' only)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# ------------------------------------------------------------------------------------------ results


def _parse_line(line: str) -> dict[str, Any]:
    line = line.rstrip("\r\n")
    try:
        obj = json.loads(line)
    except ValueError:
        return {"event": "stdout", "line": line}
    if not isinstance(obj, dict):
        return {"event": "stdout", "line": line}
    return obj


class DriverResult(list):  # list[dict[str, Any]]
    """The JSON events of one driver run, plus ``returncode``, ``stderr``, ``cmd``, ``log_dir``."""

    def __init__(
        self,
        events: Iterable[dict[str, Any]],
        *,
        returncode: int | None,
        stderr: str,
        cmd: list[str],
        log_dir: Path | None,
        duration: float,
    ) -> None:
        super().__init__(events)
        self.returncode = returncode
        self.stderr = stderr
        self.cmd = cmd
        self.log_dir = log_dir
        self.duration = duration

    def of(self, *events: str) -> list[dict[str, Any]]:
        return [e for e in self if e.get("event") in events]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.of("error")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.errors

    def describe(self, tail: int = 60) -> str:
        lines = [
            f"cmd: {' '.join(self.cmd)}",
            f"exit code: {self.returncode}  ({self.duration:.1f}s)",
            f"log dir: {self.log_dir}",
            f"---- last {tail} events ----",
        ]
        lines += [json.dumps(e, ensure_ascii=False)[:600] for e in self[-tail:]]
        lines += ["---- stderr (tail) ----", self.stderr[-6000:]]
        if self.log_dir:
            cpp = sorted(Path(self.log_dir).glob("logs/rocketmq-cpp/*.log*"))
            if cpp:
                lines += [f"---- C++ client log {cpp[-1]} (tail) ----", cpp[-1].read_text(errors="replace")[-4000:]]
            java = Path(self.log_dir) / "logs" / "rocketmqlogs" / "rocketmq_client.log"
            if java.exists():
                lines += [f"---- Java client log {java} (tail) ----", java.read_text(errors="replace")[-6000:]]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<DriverResult rc={self.returncode} events={len(self)} cmd={self.cmd[1:3]}>"


_CPP_SHUTDOWN_ABORT = "boost::thread_interrupted"


def settled_code(returncode: int | None, stderr: str, events: list[dict[str, Any]]) -> int | None:
    """A driver's exit code, except one known defect of RocketMQ's C++ core: it can abort (SIGABRT) in its own
    shutdown, ``terminate called after throwing an instance of 'boost::thread_interrupted'``, after the driver
    printed its outcome ("done", emitted before the shutdown). That run's code is the one "done" reports; anything
    else (no "done", another abort) stays a failure."""
    if returncode == -signal.SIGABRT and _CPP_SHUTDOWN_ABORT in stderr:
        done = [e for e in events if e.get("event") == "done"]
        if done and isinstance(done[-1].get("exit_code"), int):
            return int(done[-1]["exit_code"])
    return returncode


def _kill_group(proc: subprocess.Popen[Any], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def run_driver(
    kind: str,
    args: Sequence[str],
    timeout: float = 180.0,
    *,
    env: dict[str, str] | None = None,
    log_dir: Path | None = None,
) -> DriverResult:
    """Run a driver to completion and return its events. The driver enforces its own ``--timeout``; ``timeout``
    here is a last-resort limit after which the process group is killed and DriverTimeout raised."""
    log_dir = log_dir or new_log_dir(kind)
    cmd = driver_command(kind, args)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=driver_env(kind, log_dir, env),
        cwd=str(log_dir),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc, signal.SIGKILL)
        out, err = proc.communicate()
        res = DriverResult(
            [_parse_line(x) for x in out.decode("utf-8", "replace").splitlines() if x.strip()],
            returncode=None,
            stderr=err.decode("utf-8", "replace"),
            cmd=cmd,
            log_dir=log_dir,
            duration=time.monotonic() - t0,
        )
        raise DriverTimeout(f"driver did not exit within {timeout}s\n{res.describe()}") from None
    events = [_parse_line(x) for x in out.decode("utf-8", "replace").splitlines() if x.strip()]
    stderr = err.decode("utf-8", "replace")
    return DriverResult(
        events,
        returncode=settled_code(proc.returncode, stderr, events),
        stderr=stderr,
        cmd=cmd,
        log_dir=log_dir,
        duration=time.monotonic() - t0,
    )


class DriverProcess:
    """A driver running in the background; its JSON lines are collected by a thread.

    Use as a context manager (stops the driver on exit), or call ``stop()``.
    """

    def __init__(
        self, kind: str, args: Sequence[str], *, env: dict[str, str] | None = None, log_dir: Path | None = None
    ) -> None:
        self.kind = kind
        self.log_dir = log_dir or new_log_dir(kind)
        self.cmd = driver_command(kind, args)
        self._stderr_path = self.log_dir / "driver.stderr"
        self._stderr_file = open(self._stderr_path, "wb")  # noqa: SIM115 - closed in _finish
        self._events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._eof = False
        self._t0 = time.monotonic()
        self._t_end: float | None = None
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file,
            stdin=subprocess.DEVNULL,
            env=driver_env(kind, self.log_dir, env),
            cwd=str(self.log_dir),
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"driver-{kind}-{self.proc.pid}", daemon=True)
        self._reader.start()

    # -- collection
    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                text = raw.decode("utf-8", "replace")
                if not text.strip():
                    continue
                ev = _parse_line(text)
                ev.setdefault("_t", round(time.monotonic() - self._t0, 3))
                with self._cond:
                    self._events.append(ev)
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._events)

    def of(self, *events: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") in events]

    @property
    def stderr(self) -> str:
        try:
            self._stderr_file.flush()
        except ValueError:
            pass
        try:
            return self._stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def poll(self) -> int | None:
        return self.proc.poll()

    # -- waiting
    def wait_for(
        self,
        event: str = "started",
        count: int = 1,
        timeout: float = 60.0,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Block until ``count`` events named ``event`` (and matching ``predicate``) were printed. Raises
        DriverTimeout (with the driver's output) on timeout, or if the driver exits first."""
        deadline = time.monotonic() + timeout

        def matches() -> list[dict[str, Any]]:
            return [e for e in self._events if e.get("event") == event and (predicate is None or predicate(e))]

        with self._cond:
            while True:
                got = matches()
                if len(got) >= count:
                    return got
                if self._eof:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        why = "driver exited" if self._eof else f"timed out after {timeout}s"
        raise DriverTimeout(f"waiting for {count} x {event!r}: {why}, got {len(got)}\n{self.describe()}")

    def wait(self, timeout: float = 180.0) -> int:
        """Wait for the driver to exit by itself; returns its exit code. Kills it and raises on timeout."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(grace=2.0)
            raise DriverTimeout(f"driver did not exit within {timeout}s\n{self.describe()}") from None
        self._finish()
        settled = settled_code(code, self.stderr, self.events)
        return code if settled is None else settled

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM (consumers then print 'done' and exit), SIGKILL after ``grace`` seconds; the exit code as
        ``wait`` gives it."""
        if self.proc.poll() is None:
            _kill_group(self.proc, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._finish()
        settled = settled_code(self.proc.returncode, self.stderr, self.events)
        return self.proc.returncode if settled is None else settled

    def _finish(self) -> None:
        self._reader.join(timeout=5)
        if self._t_end is None:
            self._t_end = time.monotonic()
        try:
            self._stderr_file.close()
        except OSError:
            pass

    def result(self) -> DriverResult:
        end = self._t_end if self._t_end is not None else time.monotonic()
        return DriverResult(
            self.events,
            returncode=settled_code(self.proc.poll(), self.stderr, self.events),
            stderr=self.stderr,
            cmd=self.cmd,
            log_dir=self.log_dir,
            duration=end - self._t0,
        )

    def describe(self, tail: int = 60) -> str:
        return self.result().describe(tail)

    def __enter__(self) -> DriverProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<DriverProcess {self.kind} pid={self.proc.pid} rc={self.proc.poll()} events={len(self._events)}>"


def start_driver(
    kind: str, args: Sequence[str], *, env: dict[str, str] | None = None, log_dir: Path | None = None
) -> DriverProcess:
    """Start a driver in the background (e.g. a consumer) and return its DriverProcess."""
    return DriverProcess(kind, args, env=env, log_dir=log_dir)


def ready_driver(kind: str, args: Sequence[str], timeout: float = 90.0) -> DriverProcess:
    """Start a consumer driver and wait for its ``ready`` event (its first receive call came back); the driver is
    stopped again if that never comes."""
    d = start_driver(kind, args)
    try:
        d.wait_for("ready", timeout=timeout)
    except BaseException:
        d.stop()
        raise
    return d


# ------------------------------------------------------------------------------------------ helpers


def by_key(events: Iterable[dict[str, Any]], field: str = "keys") -> dict[Any, list[dict[str, Any]]]:
    """Group events by a field (e.g. 'keys', 'body', 'msg_id') - handy for duplicate / loss checks."""
    out: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        out.setdefault(e.get(field), []).append(e)
    return out


if __name__ == "__main__":  # pragma: no cover - manual use: python -m tests.interop.clients rmqcp produce ...
    if len(sys.argv) < 3:
        print(f"usage: python -m tests.interop.clients {{{'|'.join(KINDS)}}} <driver args>", file=sys.stderr)
        raise SystemExit(2)
    r = run_driver(sys.argv[1], sys.argv[2:])
    for e in r:
        print(json.dumps(e, ensure_ascii=False))
    print(f"# exit {r.returncode}; log dir {r.log_dir}", file=sys.stderr)
    raise SystemExit(r.returncode or 0)
