"""bench/bench_rocketmq.py's parts: Apache RocketMQ 5.5.0 and ``sievemq dev`` driven by the same Java client
(``servers.py`` starts them, ``driver.py`` compiles and runs ``BenchDriver.java``, ``runner.py`` the phases,
``report.py`` the tables)."""
