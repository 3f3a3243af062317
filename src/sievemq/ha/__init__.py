"""Master/slave replication of the commit log (RocketMQ's HA): the wire format, the master's and the slave's side.

See docs/protocol/replication.md for the protocol and the rules (where a copy starts, what the master waits for
under SYNC_MASTER, what makes a returning master refuse to serve).
"""
