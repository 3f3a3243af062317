"""Apache RocketMQ's ``mqadmin`` for the compatibility tests: one JVM runs many commands.

A JVM start costs seconds on the test machines, so ``MqAdmin`` starts ``tests/compat/drivers/MqAdminBatch.java``
(compiled by ``tests/compat/setup_reference.sh``) once and hands it one command per line; each command answers
``Run(out, err, exit)``. The normalisation helpers below turn what differs between any two brokers (addresses,
ports, times, ids, cluster and broker names, versions) into placeholders, so that the output against Apache
RocketMQ and against sievemq can be compared as text (docs/compat.md, "mqadmin").
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from tests.support.rocketmq import LATEST, interop_dir, java, reference_lib

DRIVER = "MqAdminBatch"
STOPPED = -2
"""``Run.exit`` of a command stopped at its timeout (``run(..., partial=True)``)."""


class Run(NamedTuple):
    """What one mqadmin command printed, and the status of a ``System.exit`` it called (0 when it returned; an
    exception that escaped mqadmin's own handler is in ``err``, with exit -1)."""

    out: str
    err: str
    exit: int


class MqAdmin:
    """A running ``MqAdminBatch`` JVM (a small heap; its ``user.home`` and RocketMQ home in ``home``, so that the
    client's logs stay out of ``$HOME``). Use as a context manager, or ``start``/``close``."""

    def __init__(self, home: Path, version: str = LATEST, heap_mb: int = 96) -> None:
        self.home = home
        self.version = version
        self.heap_mb = heap_mb
        self._popen: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._pending = b""

    def start(self) -> MqAdmin:
        """Start the JVM (it then waits for commands)."""
        lib = reference_lib(self.version)
        drivers = interop_dir() / f"rocketmq-{self.version}" / "drivers"
        if not (drivers / f"{DRIVER}.class").exists():
            raise RuntimeError(f"{drivers}/{DRIVER}.class is missing: tests/compat/setup_reference.sh compiles it")
        self.home.mkdir(parents=True, exist_ok=True)
        args = [
            java(),
            "-Xms32m",
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            "-Djava.security.manager=allow",
            f"-Duser.home={self.home}",
            f"-Drocketmq.home.dir={self.home}",
            "-Drocketmq.client.logRoot=" + str(self.home / "logs"),
            "-cp",
            f"{lib}/*{os.pathsep}{drivers}",
            DRIVER,
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "ROCKETMQ_HOME")}
        with open(self.home / "mqadmin-batch.err", "ab") as err:
            # cwd: consumerStatus writes its files relative to the working folder
            self._popen = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                           cwd=self.home, start_new_session=True)  # fmt: skip
        return self

    def run(self, *args: str, timeout: float = 60.0, partial: bool = False) -> Run:
        """Run ``mqadmin args...`` and wait for it (``timeout`` seconds: then ``TimeoutError``, or with ``partial``
        what it printed so far with exit ``STOPPED``, for the commands that never end; the command's thread is
        interrupted and the JVM goes on with the next command)."""
        with self._lock:
            p = self._popen
            assert p is not None and p.stdin is not None and p.stdout is not None, "not started"
            line = json.dumps({"args": list(args), "timeoutMs": int(timeout * 1000)}) + "\n"
            p.stdin.write(line.encode())
            p.stdin.flush()
            answer = self._read_line(timeout + 30.0)
        res = json.loads(answer)
        if res["timeout"] and partial:
            return Run(res["out"], res["err"], STOPPED)
        if res["timeout"]:
            raise TimeoutError(f"mqadmin {' '.join(args)} did not end within {timeout}s; it printed:\n{res['out']}")
        err, code = res["err"], res["exit"]
        if res["exception"]:
            err, code = err + res["exception"], -1
        return Run(res["out"], err, 0 if code is None else int(code))

    def _read_line(self, timeout: float) -> str:
        p = self._popen
        assert p is not None and p.stdout is not None
        fd = p.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"MqAdminBatch gave no answer within {timeout}s")
                if sel.select(left):
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        raise RuntimeError(f"MqAdminBatch exited ({p.poll()}); see {self.home}/mqadmin-batch.err")
                    self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode()

    def close(self) -> None:
        """End the JVM (end of input, then SIGKILL if it lingers)."""
        p, self._popen = self._popen, None
        if p is None:
            return
        try:
            if p.stdin is not None:
                p.stdin.close()
            p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()
        finally:
            if p.stdout is not None:
                p.stdout.close()

    def __enter__(self) -> MqAdmin:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# ---- normalisation ---------------------------------------------------------------------------------------------

ADDR = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}:\d{1,5}\b")
"""host:port."""
IP = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
DATETIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,3})?\b")
"""``yyyy-MM-dd HH:mm:ss[,SSS]`` (mqadmin's UtilAll.timeMillisToHumanString2 and friends)."""
HUMAN_TIME = re.compile(r"\b\d{17}\b")
"""``yyyyMMddHHmmssSSS`` (UtilAll.timeMillisToHumanString)."""
EPOCH_MS = re.compile(r"\b1[6-9]\d{11}\b")
"""Milliseconds since 1970 (2020 to 2033)."""
MSG_ID = re.compile(r"\b[0-9A-F]{32}\b")
"""A message id: an offset id (host, port, commit-log offset) or a unique key (MessageClientIDSetter)."""
CLIENT_ID = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}@[\w.#@-]+")
"""A client id (``ip@instance`` with optional ``#...`` parts)."""


def normalise(text: str, names: Mapping[str, str] | None = None, *, numbers: Iterable[str] = ()) -> str:
    """``text`` with what legitimately differs between two brokers replaced: ``names`` first (e.g. the cluster and
    broker names: ``{"RefCluster": "CLUSTER", "ref-a": "BROKER"}``), then client ids, addresses, times and message
    ids, and runs of spaces (mqadmin pads columns to the widest value) made one. ``numbers``: regular expressions of
    whole words to replace by ``N`` (counters that depend on the moment, e.g. ``r"\\d+\\.\\d+"`` for rates)."""
    for real, placeholder in sorted((names or {}).items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<![\w-]){re.escape(real)}(?![\w-])", placeholder, text)
    text = CLIENT_ID.sub("CLIENT_ID", text)
    text = ADDR.sub("ADDR", text)
    text = IP.sub("IP", text)
    text = DATETIME.sub("TIME", text)
    text = HUMAN_TIME.sub("TIME", text)
    text = EPOCH_MS.sub("TIME_MS", text)
    text = MSG_ID.sub("MSG_ID", text)
    for pattern in numbers:
        text = re.sub(rf"(?<![\w.]){pattern}(?![\w.])", "N", text)
    return "\n".join(" ".join(line.split()) for line in text.strip().splitlines())


def lines(text: str) -> list[str]:
    """The non-empty lines of (normalised) ``text``."""
    return [ln for ln in text.splitlines() if ln.strip()]


def kv_lines(text: str, sep: str = ":") -> dict[str, str]:
    """A ``key  : value`` listing (brokerStatus, getBrokerConfig, consumerStatus...) as a dict, key and value
    stripped; lines without ``sep`` are left out."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        key, found, value = ln.partition(sep)
        if found and key.strip():
            out[key.strip()] = value.strip()
    return out


def table(text: str) -> list[list[str]]:
    """A column listing (clusterList, topicStatus, consumerProgress...) as rows of whitespace-separated cells."""
    return [ln.split() for ln in text.splitlines() if ln.strip()]
