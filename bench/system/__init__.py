"""The system benchmark's parts: sievemq, Redis Streams and Tansu (Kafka protocol) peers, measuring, report.

``bench/bench_system.py`` is the entry point; ``latency_consumer`` runs as a child process of it.
"""
