"""Replication lag in bytes and seconds, on masters (per connected slave) and on slaves (docs/metrics.md §7)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from sievemq.broker.replication import Replication
from sievemq.metrics.families import gauge

__all__ = ["ReplicationCollector"]

LAG_BYTES_HELP = ("Bytes of commit log a slave does not hold yet: on a master, per connected slave (peer: its "
                  "address); on a slave, behind what its master announced (peer: the master's HA address)")  # fmt: skip
LAG_SECONDS_HELP = ("Seconds a slave is behind: since it last held everything its master had at some moment "
                    "(0 while it holds the master's whole commit log)")  # fmt: skip


class ReplicationCollector:
    """``sievemq_replication_*`` from the broker's ``Replication`` (role, HA server, HA client)."""

    def __init__(self, replication: Replication) -> None:
        self.replication = replication

    def collect(self) -> Iterable[Metric]:
        """Lag per slave on a master, lag to the master on a slave."""
        r = self.replication
        lag_bytes = GaugeMetricFamily("sievemq_replication_lag_bytes", LAG_BYTES_HELP, labels=["role", "peer"])
        lag_seconds = GaugeMetricFamily("sievemq_replication_lag_seconds", LAG_SECONDS_HELP, labels=["role", "peer"])
        now = time.monotonic()
        if r.is_slave:
            c = r.client
            peer = r.master_ha or ""
            lag_bytes.add_metric(["slave", peer], c.lag_bytes if c is not None else 0)
            lag_seconds.add_metric(["slave", peer], c.lag_seconds if c is not None else 0.0)
            yield gauge("sievemq_replication_following", "1 while this slave copies its master's commit log",
                        1 if c is not None and c.connected_to else 0)  # fmt: skip
        else:
            end = r.store.max_phy_offset
            slaves = [s for s in list(r.server.slaves.values()) if s.lag is not None]
            for s in slaves:
                lag_bytes.add_metric(["master", s.addr], max(0, end - s.acked))
                lag_seconds.add_metric(["master", s.addr], s.lag.seconds(s.acked, end, now) if s.lag else 0.0)
            yield gauge("sievemq_replication_slaves", "Slaves connected to this master's HA port",
                        len(r.server.slaves))  # fmt: skip
            yield gauge("sievemq_replication_refusing_writes", "1 while this master refuses writes because it holds "
                        "less than a slave (recover it with --recover-from-slave)", 1 if r.behind else 0)  # fmt: skip
        yield lag_bytes
        yield lag_seconds
