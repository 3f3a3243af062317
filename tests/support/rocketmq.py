"""Apache RocketMQ itself on loopback, the reference of the compatibility tests (tests/compat, docs/compat.md).

``tests/compat/setup_reference.sh`` resolves the real name server, broker, proxy and mqadmin from Maven Central into
``.interop/rocketmq-VERSION/lib`` (once per machine); this module starts them as Java processes on free ports,
with small heaps, their logs and stores under the test's folder, and stops them by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.procs import _bindable, free_port, wait_port

REPO_ROOT = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = REPO_ROOT / "tests" / "compat" / "setup_reference.sh"
LATEST = "5.5.0"
"""The newest Apache RocketMQ release whose jars Maven Central serves whole (5.5.1 lacks some modules there)."""

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"

_install_lock = threading.Lock()
_installed: dict[str, Path] = {}


def interop_dir() -> Path:
    """Where the reference is installed (``$INTEROP_DIR`` or ``<repo>/.interop``), as for the interop clients."""
    return Path(os.environ.get("INTEROP_DIR") or (REPO_ROOT / ".interop")).resolve()


def reference_lib(version: str = LATEST) -> Path:
    """The folder of Apache RocketMQ ``version``'s jars, resolved by setup_reference.sh on first use. A failed
    resolution fails the calling test with the script's output (it never skips)."""
    with _install_lock:
        if version in _installed:
            return _installed[version]
        env = {**os.environ, "INTEROP_DIR": str(interop_dir()), "ROCKETMQ_VERSIONS": version}
        proc = subprocess.run(["bash", str(SETUP_SCRIPT)], capture_output=True, text=True, env=env, check=False,
                              stdin=subprocess.DEVNULL, timeout=1800)  # fmt: skip
        if proc.returncode != 0:
            import pytest

            pytest.fail(f"setup_reference.sh failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}", pytrace=False)
        lib = interop_dir() / f"rocketmq-{version}" / "lib"
        _installed[version] = lib
        return lib


def java() -> str:
    """The ``java`` the reference runs on (``$JAVA_HOME/bin/java`` when set)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("java is not installed (Apache RocketMQ needs Java 8-17)")
    return found


def jvm_args(lib: Path, home: Path, heap_mb: int) -> list[str]:
    """A small JVM for one RocketMQ role: its logs (``~/logs/rocketmqlogs``) and default store under ``home``."""
    return [
        java(),
        f"-Xms{min(64, heap_mb)}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC",
        "-XX:-UsePerfData",
        "-Djava.net.preferIPv4Stack=true",
        f"-Duser.home={home}",
        f"-Drocketmq.home.dir={home}",
        "-cp",
        f"{lib}/*",
    ]


def reference_port() -> int:
    """A free port whose neighbours RocketMQ's broker also takes are free: port + 1 (HA) and port - 2 (the
    "fast" remoting server)."""
    while True:
        port = free_port()
        if _bindable(port - 2):
            return port


@dataclass
class JavaProc:
    """One running RocketMQ role."""

    name: str
    args: list[str]
    port: int
    log_path: Path
    ready_text: str
    popen: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> JavaProc:
        """Start and wait until it listens and has printed ``ready_text`` (a loaded machine starts a JVM slowly)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)  # fmt: skip
        wait_port(self.port, timeout=timeout, proc=self.popen)
        deadline = time.monotonic() + timeout
        while self.ready_text.encode() not in self.log_path.read_bytes():
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not print {self.ready_text!r} within {timeout}s:\n{self.log()}")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 60.0, graceful: bool = True) -> None:
        """SIGTERM (RocketMQ's shutdown hooks flush and close), SIGKILL when it does not end in time; at once when
        not ``graceful``."""
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def log(self) -> str:
        """What the process printed (its detailed logs are under ``home/logs/rocketmqlogs``)."""
        try:
            return self.log_path.read_text(errors="replace")[-20_000:]
        except FileNotFoundError:
            return ""


def _properties(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in values.items())


BROKER_DEFAULTS: dict[str, object] = {
    "brokerClusterName": "RefCluster",
    "brokerName": "ref-a",
    "brokerId": 0,
    "brokerIP1": "127.0.0.1",
    "autoCreateTopicEnable": True,
    "autoCreateSubscriptionGroup": True,
    "mappedFileSizeCommitLog": 64 * 1024 * 1024,
    # The test machines' disks may be well used: RocketMQ refuses sends above 90 % by default.
    "diskMaxUsedSpaceRatio": 99,
    "diskSpaceWarningLevelRatio": 0.99,
    "diskSpaceCleanForciblyRatio": 0.99,
}
"""Broker settings every reference broker gets (a test adds or overrides its own)."""


@dataclass
class Reference:
    """A running Apache RocketMQ: a name server and one master broker (and a proxy when asked)."""

    version: str
    home: Path
    namesrv_port: int
    broker_port: int
    procs: list[JavaProc] = field(default_factory=list)
    proxy_port: int | None = None

    @property
    def namesrv(self) -> str:
        """The name server's ``host:port``."""
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        """The master broker's ``host:port``."""
        return f"127.0.0.1:{self.broker_port}"

    @property
    def grpc(self) -> str:
        """The proxy's gRPC endpoint (5.x clients)."""
        assert self.proxy_port is not None, "started without a proxy"
        return f"127.0.0.1:{self.proxy_port}"

    def logs(self) -> str:
        """Each process's console output, for a failed test's report."""
        return "\n".join(f"---- {p.name} ----\n{p.log()}" for p in self.procs)


LOGBACK = """<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{20} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
"""
"""RocketMQ 4's roles read ``$ROCKETMQ_HOME/conf/logback_<role>.xml`` (its distribution ships them, its jars do not):
warnings and errors to the console, which the tests keep."""


@contextmanager
def rocketmq(tmp: Path, version: str = LATEST, broker: Mapping[str, object] | None = None, proxy: bool = False,
             graceful: bool = False, plain_acl: str | None = None) -> Iterator[Reference]:  # fmt: skip
    """Apache RocketMQ ``version`` (a name server and a broker, with ``broker`` settings over ``BROKER_DEFAULTS``;
    a proxy in cluster mode when ``proxy``) on free loopback ports, killed at the end (stopped with SIGTERM when
    ``graceful``: RocketMQ's shutdown takes half a minute on a loaded machine). ``plain_acl``: the text of the
    broker's ``conf/plain_acl.yml`` (RocketMQ 4's plain ACL, with ``aclEnable`` in ``broker``)."""
    lib = reference_lib(version)
    home = tmp / f"rocketmq-{version}"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    if version.startswith("4."):
        for role in ("namesrv", "broker", "tools"):
            (home / "conf" / f"logback_{role}.xml").write_text(LOGBACK)
    if plain_acl is not None:
        (home / "conf" / "plain_acl.yml").write_text(plain_acl)
    ref = Reference(version, home, free_port(), reference_port())
    ns_conf = home / "namesrv.properties"
    ns_conf.write_text(_properties({"listenPort": ref.namesrv_port}))
    br_conf = home / "broker.properties"
    settings = {
        **BROKER_DEFAULTS,
        "listenPort": ref.broker_port,
        "haListenPort": ref.broker_port + 1,
        "namesrvAddr": ref.namesrv,
        "storePathRootDir": home / "store",
        "storePathCommitLog": home / "store" / "commitlog",
        **(broker or {}),
    }
    br_conf.write_text(_properties(settings))
    try:
        ns = JavaProc("namesrv", [*jvm_args(lib, home, 128), NAMESRV_MAIN, "-c", str(ns_conf)], ref.namesrv_port,
                      home / "namesrv.out", "boot success")  # fmt: skip
        ref.procs.append(ns)
        ns.start()
        br = JavaProc("broker", [*jvm_args(lib, home, 384), BROKER_MAIN, "-c", str(br_conf)], ref.broker_port,
                      home / "broker.out", "boot success")  # fmt: skip
        ref.procs.append(br)
        br.start()
        if proxy:
            ref.proxy_port = free_port()
            proxy_conf = home / "rmq-proxy.json"
            proxy_conf.write_text(json.dumps({
                "rocketMQClusterName": settings["brokerClusterName"],
                "namesrvAddr": ref.namesrv,
                "proxyMode": "cluster",
                "grpcServerPort": ref.proxy_port,
                "remotingListenPort": free_port(),
            }))  # fmt: skip
            px = JavaProc("proxy", [*jvm_args(lib, home, 256), PROXY_MAIN, "-pc", str(proxy_conf)], ref.proxy_port,
                          home / "proxy.out", "")  # fmt: skip
            ref.procs.append(px)
            px.start()
        yield ref
    finally:
        for p in reversed(ref.procs):
            p.stop(graceful=graceful)
