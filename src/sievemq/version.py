"""sievemq's version: a module of its own, so a server process that reports it does not load the client."""

__version__ = "0.1.0"
