"""``bench/bench_groups.py``'s parts: the workload (messages, group filters, what each group should get), the
consumer child processes and the report."""
