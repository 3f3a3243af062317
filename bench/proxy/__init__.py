"""The proxy benchmark's parts: the servers and CPU counters, the 5.x client's driver processes, the 4.x rows,
the rounds and the report.

``bench/bench_proxy.py`` is the entry point; ``bench/proxy_driver.py`` runs under the 5.x client's interpreter.
"""
