#!/usr/bin/env python3
"""Interop driver for ``rocketmq-client-python==0.5.0rc2`` (the Apache wrapper of the RocketMQ C++ core).

Run with the interpreter of ``.interop/venv-rmqcp``. Subcommands::

    produce --namesrv H:P --topic T --group G --count N [--tags TagA,TagB] [--key-prefix k] [--prop k=v ...]
    consume --namesrv H:P --topic T --group G --expr "TagA || TagB" --expect N --timeout S [--from first|last]
            [--linger 2]

Prints one JSON object per line on stdout (``started``, ``sent``, ``received``, ``rejected``, ``error``,
``timeout``, ``done``). Exit codes: 0 ok, 1 send/start failure, 2 usage/import error, 3 consume timeout,
4 watchdog (the native client hung). See ``_cpp_common.py``.
"""

import sys

from _cpp_common import main

if __name__ == "__main__":
    main(sys.argv[1:], prog="rmqcp_driver.py", client_name="rocketmq-client-python 0.5.0rc2", with_batch=False)
