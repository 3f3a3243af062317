#!/usr/bin/env bash
# Install sievemq with its test tools and the real RocketMQ clients used by interop tests, then run
# lint, type checks and the whole test suite. Extra arguments go to pytest (e.g. -k interop).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# Filter workers' seccomp layer loads the system's libseccomp (Debian's libseccomp2) through pyseccomp.
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -q && apt-get install -y -q libseccomp2
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
bash tests/interop/setup_clients.sh
.venv/bin/ruff check src tests bench
.venv/bin/mypy
exec .venv/bin/pytest -p no:cacheprovider "$@"
