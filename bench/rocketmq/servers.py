"""The two brokers under comparison: Apache RocketMQ 5.5.0 (a name server JVM and a broker JVM, from the jars
tests/compat/setup_reference.sh resolved) and ``sievemq dev`` (name server and broker in one process), each on free
ports of 127.0.0.1 with its store in the run's temporary folder, ASYNC_FLUSH, and stopped by PID."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.procs import dev_proc, free_port
from tests.support.rocketmq import (
    BROKER_DEFAULTS,
    BROKER_MAIN,
    LATEST,
    NAMESRV_MAIN,
    JavaProc,
    interop_dir,
    java,
    reference_port,
)
from tests.support.wire import wait_routed

import sievemq
from sievemq.admin.api import AdminClient

VERSION = LATEST
"""The Apache RocketMQ release compared (its broker, name server and Java client)."""

JVM_COMMON = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30",
    "-XX:SoftRefLRUPolicyMSPerMB=0",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:-UseLargePages",
    "-XX:-UsePerfData",
    "-Djava.net.preferIPv4Stack=true",
]
"""RocketMQ's own runbroker.sh / runserver.sh options for Java 9+ (G1), without the GC log and pre-touch."""
BROKER_HEAP = ["-Xms1g", "-Xmx1g", "-XX:MaxDirectMemorySize=1g"]
"""runbroker.sh has -Xms8g -Xmx8g -XX:MaxDirectMemorySize=15g: scaled down to this 2-core machine."""
NAMESRV_HEAP = ["-Xms256m", "-Xmx256m"]
"""runserver.sh has -Xms4g -Xmx4g."""
ROCKETMQ_BROKER: dict[str, object] = {
    **{k: v for k, v in BROKER_DEFAULTS.items() if k != "mappedFileSizeCommitLog"},  # RocketMQ's 1 GiB, as sievemq's
    "brokerClusterName": "DefaultCluster",
    "brokerName": "rmq-a",
    "flushDiskType": "ASYNC_FLUSH",
    "autoCreateTopicEnable": True,
}
"""The reference broker's settings (tests/support/rocketmq.py's, with RocketMQ's own commit-log segment size)."""


def reference_lib() -> Path:
    """The folder of RocketMQ's jars, or exit saying how to resolve them."""
    lib = interop_dir() / f"rocketmq-{VERSION}" / "lib"
    if not (lib / f"rocketmq-broker-{VERSION}.jar").is_file():
        raise SystemExit(f"{lib} holds no rocketmq-broker-{VERSION}.jar: run tests/compat/setup_reference.sh first")
    return lib


@dataclass
class Server:
    """One system: where its name server is, and the processes whose CPU counts (``broker`` first)."""

    name: str
    """``sievemq`` or ``rocketmq``."""
    namesrv: str
    broker: str
    pids: dict[str, int] = field(default_factory=dict)
    """``broker`` (sievemq: the dev process, name server included) and, for RocketMQ, ``namesrv``."""
    about: str = ""
    """The header line: version, processes, settings."""
    log: Path | None = None

    @property
    def title(self) -> str:
        """``sievemq`` / ``RocketMQ``."""
        return "RocketMQ" if self.name == "rocketmq" else "sievemq"


def _properties(values: dict[str, object]) -> str:
    return "".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in values.items())


def start_rocketmq(tmp: Path, lib: Path, stack: contextlib.ExitStack) -> Server:
    """Apache RocketMQ's name server and broker (stopped by ``stack``: SIGTERM, SIGKILL after 10 s)."""
    home = tmp / "rocketmq"
    home.mkdir(parents=True)
    ns_port, br_port = free_port(), reference_port()
    (home / "namesrv.properties").write_text(_properties({"listenPort": ns_port}))
    namesrv = f"127.0.0.1:{ns_port}"
    settings = {
        **ROCKETMQ_BROKER,
        "listenPort": br_port,
        "haListenPort": br_port + 1,
        "namesrvAddr": namesrv,
        "storePathRootDir": home / "store",
        "storePathCommitLog": home / "store" / "commitlog",
    }
    (home / "broker.conf").write_text(_properties(settings))
    base = [java(), *JVM_COMMON, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}"]
    ns_args = [*base, *NAMESRV_HEAP, "-cp", f"{lib}/*", NAMESRV_MAIN, "-c", str(home / "namesrv.properties")]
    ns = JavaProc("namesrv", ns_args, ns_port, home / "namesrv.out", "boot success")
    stack.callback(ns.stop, 10.0)
    ns.start()
    br = JavaProc("broker", [*base, *BROKER_HEAP, "-cp", f"{lib}/*", BROKER_MAIN, "-c", str(home / "broker.conf")],
                  br_port, home / "broker.out", "boot success")  # fmt: skip
    stack.callback(br.stop, 10.0)
    br.start()
    assert ns.popen is not None and br.popen is not None
    about = (f"Apache RocketMQ {VERSION} (jars of {lib}): broker JVM pid {br.popen.pid} ({' '.join(BROKER_HEAP)}, "
             f"G1 as runbroker.sh), name server JVM pid {ns.popen.pid} ({' '.join(NAMESRV_HEAP)}); ASYNC_FLUSH, "
             "1 GiB commit-log segments, autoCreateTopicEnable, other settings RocketMQ's defaults")  # fmt: skip
    return Server("rocketmq", namesrv, f"127.0.0.1:{br_port}", {"broker": br.popen.pid, "namesrv": ns.popen.pid},
                  about, home / "broker.out")  # fmt: skip


def start_sievemq(tmp: Path, stack: contextlib.ExitStack) -> Server:
    """``sievemq dev`` with ``--grpc-port 0`` and ``--http-port 0`` (no proxy, no dashboard or /metrics: broker
    against broker), ASYNC_FLUSH (stopped by ``stack``: SIGTERM, SIGKILL after 15 s)."""
    dev = dev_proc(tmp / "sievemq", "--grpc-port", "0", "--flush", "async", http=False)
    stack.callback(dev.stop)
    dev.start()
    assert dev.popen is not None
    banner = dev.log()
    extras = {"gRPC proxy": "gRPC proxy" in banner, "dashboard and /metrics": "dashboard" in banner}
    state = ", ".join(f"{k} {'ON' if on else 'off'}" for k, on in extras.items())
    about = (f"sievemq {sievemq.__version__}: `sievemq dev` pid {dev.popen.pid} (name server + broker in one "
             f"process; {state}: --grpc-port 0 --http-port 0), ASYNC_FLUSH (flushed every 500 ms), 1 GiB commit-log "
             "segments")  # fmt: skip
    return Server("sievemq", str(dev.extra["namesrv"]), dev.addr, {"broker": dev.popen.pid}, about, dev.log_path)


async def _create_topic(server: Server, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker, then wait until its name server routes the topic (RocketMQ's broker
    registers it right after, in a request of its own)."""
    async with AdminClient(server.namesrv) as admin:
        await admin.create_topic(topic, queues=queues, broker=server.broker)
    await wait_routed(server.namesrv, [topic], who=server.title)


def create_topics(servers: list[Server], topics: list[str], queues: int) -> None:
    """Every topic on every broker, with ``queues`` read and write queues, each routed before this returns (the
    tests/compat way, tests/compat/sides.py's create_topic)."""

    async def all_topics() -> None:
        await asyncio.gather(*(_create_topic(s, t, queues) for s in servers for t in topics))

    asyncio.run(all_topics())


@contextlib.contextmanager
def started(tmp: Path, lib: Path) -> Iterator[list[Server]]:
    """Both systems, RocketMQ first (its JVMs take longest); everything stopped at the end, also on errors."""
    with contextlib.ExitStack() as stack:
        yield [start_rocketmq(tmp, lib, stack), start_sievemq(tmp, stack)]
