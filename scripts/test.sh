#!/usr/bin/env bash
# Install sievemq with its test tools and the real RocketMQ clients used by interop tests, then run
# lint, type checks and the whole test suite. Extra arguments go to pytest (e.g. -k interop).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
bash tests/interop/setup_clients.sh
.venv/bin/ruff check src tests bench
.venv/bin/mypy
exec .venv/bin/pytest -p no:cacheprovider "$@"
