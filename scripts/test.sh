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
# The dashboard's browser tests (tests/dashboard/test_browser.py) drive Debian's chromium through its chromedriver;
# without them those tests fail (they never skip).
if ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; } && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null; then
  apt-get update -q && apt-get install -y -q chromium chromium-driver
fi
# The failover tests (tests/failover) run a real etcd cluster (Debian's etcd-server) and cut the network between
# hosts with nftables; without etcd they fail, without nft their partition tests skip.
if ! { command -v etcd >/dev/null && command -v nft >/dev/null; } && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null; then
  apt-get update -q && apt-get install -y -q etcd-server nftables
fi
# Apache RocketMQ itself (name server, broker, proxy, mqadmin) from Maven Central, the reference of tests/compat: it
# needs only java and mvn, so it resolves beside the installs below (its own Maven repository); waited for below.
bash tests/compat/setup_reference.sh &
reference=$!
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
# The compiled codec (setup.py builds it when a C compiler is there) must be in place here: the suite runs with it,
# and tests/unit/protocol/test_accel.py compares it with the pure-Python reference.
.venv/bin/python -c 'import sievemq.protocol._codec, sievemq.protocol._headers, sievemq.store._scan' \
  || { echo "the compiled twins did not build (see pip's output)"; exit 1; }
bash tests/interop/setup_clients.sh
wait "$reference" || { echo "resolving Apache RocketMQ (tests/compat/setup_reference.sh) failed"; exit 1; }
.venv/bin/ruff check src tests bench
.venv/bin/mypy
.venv/bin/lint-imports --no-cache  # the package's layers ([tool.importlinter] in pyproject.toml)
# Without the accelerator: the unit tests and the end-to-end send/pull paths on the pure-Python codecs.
SIEVEMQ_PURE_PYTHON=1 .venv/bin/pytest -p no:cacheprovider -q tests/unit tests/integration/test_batch.py \
  tests/integration/test_pull.py tests/integration/test_protocol.py tests/integration/test_sql92.py \
  --ignore tests/unit/protocol/test_accel.py --ignore tests/unit/remoting/test_frames_accel.py \
  --ignore tests/unit/store/test_scan_accel.py --ignore tests/unit/protocol/test_headers_accel.py
# The rest mostly waits on real processes (servers, real clients, a browser): three pytest workers run most of it
# side by side, a file's tests together in one worker (tests/support/procs.py gives each worker its own ports,
# netns.py its own subnets). The tests that measure limits against the clock or kill processes under load
# (replication, robustness, the filter server's sandbox) then run alone, on a quiet machine. PYTEST_WORKERS=0 runs
# everything in one process; so do arguments naming test files or folders.
workers=${PYTEST_WORKERS:-3}
serial=(tests/replication tests/robustness tests/filtersrv)
for arg in "$@"; do
  case "$arg" in -*) ;; *) if [ -e "${arg%%::*}" ]; then workers=0; fi ;; esac
done
if [ "$workers" = 0 ]; then
  exec .venv/bin/pytest -p no:cacheprovider "$@"
fi
ignore=()
for d in "${serial[@]}"; do ignore+=(--ignore "$d"); done
rc=0
.venv/bin/pytest -p no:cacheprovider -n "$workers" --dist loadfile "${ignore[@]}" "$@" || rc=$?
[ "$rc" = 5 ] && rc=0  # nothing selected here (e.g. -k naming only serial tests)
rc2=0
.venv/bin/pytest -p no:cacheprovider "${serial[@]}" "$@" || rc2=$?
[ "$rc2" = 5 ] && rc2=0
[ "$rc" = 0 ] && [ "$rc2" = 0 ]
