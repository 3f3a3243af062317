"""Prometheus metrics: the pure parts every role uses (docs/metrics.md).

- ``histogram.py`` / ``series.py``: fixed-bucket latency counters; bounding label sets;
- ``families.py``: metric families from what a collector read;
- ``loop_lag.py``: the event loop's lag, measured;
- ``process.py``: what every process exports (event-loop lag, connections per role, build info, CPU and memory),
  ``RoleMetrics`` and ``build_registry``, which puts a process's roles into one ``CollectorRegistry``.

Each role's collectors live beside the role and receive the services they read: ``sievemq.broker.metrics``,
``sievemq.namesrv.metrics``, ``sievemq.proxy.metrics``, ``sievemq.filtersrv.metrics`` (each with its
``*_metrics`` function wiring a running role). The HTTP port that serves them is ``sievemq.http``.
"""
