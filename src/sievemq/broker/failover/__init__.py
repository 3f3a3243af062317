"""Automatic failover (``controllerMode = etcd``): a broker that takes its role from its set's state in etcd.

``supervisor.FailoverBroker`` runs the broker term by term (one ``BrokerController`` per role and epoch);
``local.py`` holds what the broker knows of its own log between terms (its end, its epoch history, truncation).
docs/failover.md.
"""

from sievemq.broker.failover.supervisor import FailoverBroker

__all__ = ["FailoverBroker"]
