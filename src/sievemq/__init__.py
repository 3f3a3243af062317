"""sievemq: a message queue on Apache RocketMQ's architecture and 4.x wire protocol."""

__version__ = "0.1.0"
