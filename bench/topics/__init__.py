"""Parts of bench/bench_topics.py: one broker holding 1 to 100,000 topics of 4 queues (issue 32)."""
