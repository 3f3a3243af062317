"""Prometheus metrics of every role, read when ``/metrics`` is scraped (docs/metrics.md).

- ``histogram.py`` / ``series.py``: pure parts (fixed-bucket latency counters; bounding label sets);
- ``families.py``: metric families from what a collector read;
- ``process.py``: what every process exports (event-loop lag, connections per role, build info, CPU and memory)
  and ``build_registry``, which puts a process's roles into one ``CollectorRegistry``;
- ``broker.py``, ``consumers.py``, ``store.py``, ``namesrv.py``, ``proxy.py``, ``filtersrv.py``: one collector per
  subject, each given the services it reads;
- ``roles.py``: which collectors each role has (``RoleMetrics``), wired from its controller.

The HTTP port that serves them is ``sievemq.http``.
"""
