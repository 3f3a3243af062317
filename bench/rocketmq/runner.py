"""Running the comparison: start both brokers and the driver, warm up, run the phases against both back to back
(alternating which goes first), print the tables, stop everything by PID."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.rocketmq import report
from bench.rocketmq.driver import REBALANCE_MIN_INTERVAL_MS, Driver, Outcome, compile_driver
from bench.rocketmq.servers import Server, create_topics, reference_lib, started
from bench.system.common import REPO, log
from bench.system.measure import proc_cpu, proc_mem
from bench.system.sieve import git_rev

MAX_BATCH_BYTES = 4 * 1024 * 1024
"""RocketMQ's maxMessageSize (client and broker default): a whole batch must fit."""
BATCH_OVERHEAD = 256
"""Bytes a message adds to a batch beyond its body (its header fields and properties), rounded up."""
PHASES = ("single", "batch", "consume", "latency")


def batch_size(args: argparse.Namespace) -> int:
    """``--batch``, lowered to what fits RocketMQ's 4 MiB limit."""
    return max(1, min(int(args.batch), MAX_BATCH_BYTES // (int(args.size) + BATCH_OVERHEAD)))


class Bench:
    """One benchmark run's state: the servers, the driver, the settings."""

    def __init__(self, args: argparse.Namespace, servers: list[Server], driver: Driver) -> None:
        self.args = args
        self.servers = {s.name: s for s in servers}
        self.driver = driver
        self.batch = batch_size(args)
        self.problems: list[tuple[str, report.Results]] = []
        """(``warm-up`` / ``run N``, its outcomes), for the PROBLEMS section."""

    def labels(self) -> dict[str, str]:
        """Each phase's row label."""
        a = self.args
        return {
            "single": f"produce, single sends ({a.threads} threads)",
            "batch": f"produce, batches of {self.batch} ({a.batch_threads} threads)",
            "consume": "consume, new group from offset 0",
            "latency": f"latency @ {a.rate:,} msg/s, {a.seconds:g} s",
        }

    def command(self, phase: str, system: str, topics: dict[str, str], label: str, produced: int = 0) -> str:
        """The driver command of ``phase`` against ``system``."""
        a, ns = self.args, self.servers[system].namesrv
        head = f"label={label} ns={ns} size={a.size}"
        if phase == "single":
            return f"single {head} topic={topics['single']} n={topics['n']} threads={a.threads}"
        if phase == "batch":
            return f"batch {head} topic={topics['batch']} n={topics['n']} threads={a.batch_threads} batch={self.batch}"
        if phase == "consume":
            return (f"consume {head} topics={topics['single']},{topics['batch']} expected={produced} "
                    f"group=bench_consume_{label}")  # fmt: skip
        return (f"latency {head} topic={topics['latency']} rate={a.rate} seconds={topics['seconds']} "
                f"group=bench_latency_{label}")  # fmt: skip

    def one(self, phase: str, system: str, topics: dict[str, str], label: str, res: report.Results) -> Outcome:
        """Run one phase against one system, recording it in ``res``."""
        produced = 0
        if phase == "consume":
            produced = sum(res[(p, system)].messages for p in ("single", "batch") if (p, system) in res)
        log(f"{label}: {system}")
        o = self.driver.run(system, self.command(phase, system, topics, label, produced), self.servers[system].pids)
        res[(phase, system)] = o
        return o

    def warm_up(self) -> None:
        """Every phase on each system once, small and not counted (the JVMs' JIT, both brokers' first segments)."""
        n, res = self.args.warmup, report.Results()
        topics = {"single": "BenchWarmSingle", "batch": "BenchWarmBatch", "latency": "BenchWarmLatency",
                  "n": str(n), "seconds": "1"}  # fmt: skip
        for system in ("rocketmq", "sievemq"):
            for phase in PHASES:
                self.one(phase, system, topics, f"warmup_{phase}", res)
        self.problems.append(("warm-up (not counted)", res))

    def idle(self, seconds: float = 3.0) -> str:
        """The servers' CPU while nothing is sent (their background threads), as a share of one core."""
        pids = {f"{s.title} {role}": pid for s in self.servers.values() for role, pid in s.pids.items()}
        before = {k: proc_cpu(p) for k, p in pids.items()}
        time.sleep(seconds)
        return ", ".join(f"{k} {(proc_cpu(p) - before[k]) / seconds:.1%}" for k, p in pids.items())

    def run_once(self, run: int) -> report.Results:
        """All phases against both systems; the first system alternates from phase to phase and run to run."""
        a, res = self.args, report.Results()
        topics = {"single": f"BenchSingle{run}", "batch": f"BenchBatch{run}", "latency": f"BenchLatency{run}",
                  "n": str(a.messages), "seconds": f"{a.seconds:g}"}  # fmt: skip
        firsts = []
        for i, phase in enumerate(PHASES):
            order = ["sievemq", "rocketmq"] if (i + run) % 2 == 0 else ["rocketmq", "sievemq"]
            firsts.append(f"{phase} {report.TITLE[order[0]]}")
            for system in order:
                time.sleep(a.settle)  # the previous phase's writeback and the client's shutdown out of the way
                self.one(phase, system, topics, f"r{run}_{phase}", res)
        print(f"\n== run {run + 1} of {a.runs} (load average {os.getloadavg()[0]:.2f}) ==")
        labels = self.labels()
        report.print_run(res, [(p, labels[p]) for p in PHASES[:3]], labels["latency"], ", ".join(firsts))
        self.problems.append((f"run {run + 1}", res))
        return res

    def memory(self) -> dict[str, dict[str, int]]:
        """Resident memory of every server process and of the driver."""
        out = {f"{s.title} {role} (pid {pid})": proc_mem(pid) for s in self.servers.values()
               for role, pid in s.pids.items()}  # fmt: skip
        out[f"Java driver (pid {self.driver.pid})"] = proc_mem(self.driver.pid)
        return out


def print_header(args: argparse.Namespace, bench: Bench) -> None:
    """The command, versions, PIDs and settings."""
    a, d = args, bench.driver
    print(f"$ {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"sievemq tree {git_rev(REPO)}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; "
          f"Python {platform.python_version()}")  # fmt: skip
    for s in bench.servers.values():
        print(f"{s.title}: {s.about}; name server {s.namesrv}, broker {s.broker}")
    print(f"client (both): Apache RocketMQ's Java client {d.hello.get('client')} (DefaultMQProducer, "
          f"DefaultMQPushConsumer) in one JVM, pid {d.pid}, Java {d.hello.get('java')}, {' '.join(d.args[1:4])}; "
          "each phase its own client instance, through the name server; the client's defaults but "
          f"rocketmq.client.rebalance.minInterval={REBALANCE_MIN_INTERVAL_MS} ms (1000: a race at a consumer's start, "
          "see bench/README.md)")  # fmt: skip
    b = bench.batch
    clamp = f" (--batch {a.batch} lowered to fit 4 MiB)" if b != a.batch else ""
    print(f"messages: {a.messages:,} of {a.size:,} B body + a tag (TagA every 10th, TagB otherwise) per produce "
          f"phase; {a.queues} queues per topic; single: {a.threads} threads of sync send(); batched: "
          f"{a.batch_threads} threads of sync send(Collection) of {b}{clamp}; consume: DefaultMQPushConsumer, new "
          f"group, CONSUME_FROM_FIRST_OFFSET, both produce phases' topics, pull batch 32, listener batch 32, timed "
          f"from start() to the last message; latency: {a.rate:,} msg/s for {a.seconds:g} s, each an async send() "
          f"at its due time, a push consumer in the driver (already receiving) takes receive - send System.nanoTime()"
          f" from the property ts, every message counted")  # fmt: skip
    print(f"warm-up (not counted): every phase once against each system with {a.warmup:,} messages (latency 1 s); "
          f"{a.settle:g} s pause before each phase's run; CPU from /proc/<pid>/stat (utime + stime of all threads, "
          f"{os.sysconf('SC_CLK_TCK')} ticks/s) between the driver's start of timing and its result")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """The whole benchmark; 0 when every counted phase did its work, 1 when one had errors (printed, as are the
    warm-up's)."""
    lib = reference_lib()
    classes = compile_driver(lib)
    tmp = Path(tempfile.mkdtemp(prefix="sievemq-bench-rocketmq-"))
    keep = args.keep
    try:
        log("starting Apache RocketMQ (name server, broker) and sievemq dev")
        with started(tmp, lib) as servers:
            driver = Driver(classes, lib, tmp / "driver")
            finished = False
            try:
                driver.start()
                topics = ["BenchWarmSingle", "BenchWarmBatch", "BenchWarmLatency"]
                topics += [f"Bench{k}{r}" for r in range(args.runs) for k in ("Single", "Batch", "Latency")]
                create_topics(servers, topics, args.queues)
                bench = Bench(args, servers, driver)
                print_header(args, bench)
                log("warm-up")
                bench.warm_up()
                print(f"idle CPU after the warm-up (share of one core over 3 s): {bench.idle()}")
                per_run = []
                for r in range(args.runs):
                    per_run.append(report.ratios_of(bench.run_once(r), list(PHASES[:3])))
                    print()
                    report.print_memory(bench.memory())
                if args.runs > 1:
                    print()
                    labels = {**bench.labels(), "consume steady": "  consume, counted from its first message"}
                    report.print_summary(per_run, labels)
                print()
                if report.print_problems(bench.problems, driver.client_errors):
                    keep = True
                    print(f"(the Java client's log: {driver.client_log})")
                finished = True
                counted = [o for _when, res in bench.problems[1:] for o in res.values()]
                return 1 if any(o.failed for o in counted) else 0
            finally:
                driver.stop(now=not finished)
    except BaseException:
        keep = True
        raise
    finally:
        if keep:
            print(f"kept {tmp} (stores, logs: rocketmq/, sievemq/dev.log, driver/)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
