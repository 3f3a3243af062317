#!/usr/bin/env python3
"""Interop driver for ``rocketmq==0.4.4`` (messense's wrapper of the RocketMQ C++ core, import name ``rocketmq``).

Run with the interpreter of ``.interop/venv-rmq044``. Subcommands::

    produce       --namesrv H:P --topic T --group G --count N [--tags TagA,TagB] [--key-prefix k] [--prop k=v ...]
    produce-batch (same) --batch-size B       # Producer.send_batch, B messages per call
    consume       --namesrv H:P --topic T --group G --expr "TagA || TagB" --expect N --timeout S [--from first]

Same output protocol and exit codes as ``rmqcp_driver.py`` (see ``_cpp_common.py``).
"""

import sys

from _cpp_common import main

if __name__ == "__main__":
    main(sys.argv[1:], prog="rmq044_driver.py", client_name="rocketmq 0.4.4", with_batch=True)
