#!/usr/bin/env bash
# Install the real third-party RocketMQ clients that the interop tests drive.
#
# Idempotent: re-running it when everything is in place only verifies and prints "ok" lines.
# Layout (under the repo root, gitignored):
#   .interop/venv-rmqcp/   rocketmq-client-python==0.5.0rc2  (import: rocketmq.client; bundles the C++ core)
#   .interop/venv-rmq044/  rocketmq==0.4.4                   (import: rocketmq.client too -> own venv)
#   .interop/venv-rmq5/    rocketmq-python-client==5.1.2 + grpcio-tools  (the 5.x gRPC client; import: rocketmq.v5)
#   .interop/node/         ali-ons@3.12.0                    (pure JavaScript)
#   .interop/node-rmq5/    rocketmq-client-nodejs@1.0.8      (the official Node.js 5.x gRPC client)
#   .interop/java-rocketmq-client-VERSION/  our Java driver on rocketmq-client 4.9.8 / 5.5.0 (setup_java_clients.sh)
#   .interop/java-rocketmq-client-java-VERSION/  our driver of the Java 5.x gRPC client 5.0.8 (setup_java5_grpc.sh)
#
# Environment knobs:
#   INTEROP_DIR     where to install (default: <repo>/.interop)
#   INTEROP_PYTHON  interpreter for the venvs (default: python3.11, else python3)
#   INTEROP_FORCE=1 wipe and reinstall everything
#
# Needs root (or sudo) only when something must come from apt: a missing `node`/`npm`, the venv module,
# or a shared library the bundled librocketmq.so needs (it needs libstdc++6 and libgcc-s1; zlib is bundled).
set -euo pipefail

RMQCP_VERSION="0.5.0rc2"
RMQ044_VERSION="0.4.4"
RMQ5_VERSION="5.1.2"
GRPC_TOOLS_VERSION="1.85.1"
ALI_ONS_VERSION="3.12.0"
RMQ5_NODE_VERSION="1.0.8"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
dest="${INTEROP_DIR:-$repo_root/.interop}"

log() { printf '[setup_clients] %s\n' "$*"; }
die() { printf '[setup_clients] ERROR: %s\n' "$*" >&2; exit 1; }

mkdir -p "$dest"

# One installer at a time (pytest workers and CI may race).
exec 9>"$dest/.setup.lock"
if command -v flock >/dev/null 2>&1; then
  flock -w 900 9 || die "could not take $dest/.setup.lock within 900 s"
fi

# The Java drivers (Maven) and the Go driver need nothing this script installs: they build beside the Python and
# Node.js installs below, and the script waits for them at its end.
( INTEROP_DIR="$dest" bash "$here/setup_java_clients.sh" && INTEROP_DIR="$dest" bash "$here/setup_java5_grpc.sh" ) &
java_builds=$!
INTEROP_DIR="$dest" bash "$here/setup_go_clients.sh" &
go_build=$!

if [[ "${INTEROP_FORCE:-0}" == "1" ]]; then
  log "INTEROP_FORCE=1: removing $dest/venv-rmqcp $dest/venv-rmq044 $dest/node $dest/node-rmq5"
  rm -rf "$dest/venv-rmqcp" "$dest/venv-rmq044" "$dest/node" "$dest/node-rmq5"
fi

# ---------------------------------------------------------------------------------------------- apt
apt_updated=0
apt_install() {
  local sudo=""
  if [[ "$(id -u)" != "0" ]]; then
    command -v sudo >/dev/null 2>&1 || die "need root or sudo to apt-get install $*"
    sudo="sudo"
  fi
  command -v apt-get >/dev/null 2>&1 || die "apt-get not available; install manually: $*"
  if [[ "$apt_updated" == "0" ]]; then
    log "apt-get update"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  log "apt-get install -y --no-install-recommends $*"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# ------------------------------------------------------------------------------------------ python
pick_python() {
  if [[ -n "${INTEROP_PYTHON:-}" ]]; then echo "$INTEROP_PYTHON"; return; fi
  if command -v python3.11 >/dev/null 2>&1; then echo python3.11; return; fi
  if command -v python3 >/dev/null 2>&1; then echo python3; return; fi
  die "no python3.11 / python3 found"
}
PY="$(pick_python)"
log "host interpreter: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"

arch="$(uname -m)"
[[ "$arch" == "x86_64" ]] || log "WARNING: the C++ client wheels are manylinux1_x86_64 only; this is $arch"

# Check that the bundled librocketmq.so resolves all its libraries; apt-get what is missing.
fix_libs() {
  local venv="$1" so missing pkgs=() lib
  so="$(find "$venv" -name 'librocketmq.so' -print -quit)"
  [[ -n "$so" ]] || die "librocketmq.so not found under $venv"
  if ! command -v ldd >/dev/null 2>&1; then apt_install libc-bin; fi
  missing="$(ldd "$so" | awk '/not found/{print $1}')"
  if [[ -z "$missing" ]]; then
    log "ok   $(basename "$venv"): ldd $so resolves every library"
    return
  fi
  log "$(basename "$venv"): missing shared libraries: $(echo $missing)"
  for lib in $missing; do
    case "$lib" in
      libstdc++.so.*) pkgs+=(libstdc++6) ;;
      libgcc_s.so.*) pkgs+=(libgcc-s1) ;;
      libz.so.*|libz-*) pkgs+=(zlib1g) ;;
      libm.so.*|libc.so.*|libdl.so.*|librt.so.*|libpthread.so.*) pkgs+=(libc6) ;;
      *) die "don't know which Debian package provides $lib (needed by $so)" ;;
    esac
  done
  apt_install "${pkgs[@]}"
  missing="$(ldd "$so" | awk '/not found/{print $1}')"
  [[ -z "$missing" ]] || die "still missing after apt-get: $missing"
  log "ok   $(basename "$venv"): libraries installed"
}

make_venv() {
  local venv="$1"
  if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import pip' >/dev/null 2>&1; then
    return
  fi
  rm -rf "$venv"
  log "creating venv $venv"
  if ! "$PY" -m venv "$venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    local minor
    minor="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    apt_install "python${minor}-venv" || apt_install python3-venv
    "$PY" -m venv "$venv" || die "python -m venv $venv failed even after installing the venv package"
  fi
}

# install_wheel VENV DIST VERSION: pip-install DIST==VERSION unless already installed at that version.
install_wheel() {
  local venv="$1" dist="$2" version="$3" have
  make_venv "$venv"
  have="$("$venv/bin/python" - "$dist" <<'EOF' 2>/dev/null || true
import sys
from importlib.metadata import version, PackageNotFoundError
try:
    print(version(sys.argv[1]))
except PackageNotFoundError:
    pass
EOF
)"
  if [[ "$have" == "$version" ]]; then
    log "ok   $(basename "$venv"): $dist==$version already installed"
  else
    log "pip install $dist==$version into $venv (had: ${have:-nothing})"
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q "$dist==$version" \
      || die "pip install $dist==$version failed"
  fi
  fix_libs "$venv"
  # Real import, which dlopen()s librocketmq.so.
  "$venv/bin/python" -c 'from rocketmq.client import Producer, PushConsumer, Message' \
    || die "import rocketmq.client failed in $venv"
  log "ok   $(basename "$venv"): 'from rocketmq.client import Producer, PushConsumer, Message' works"
}

install_wheel "$dest/venv-rmqcp" rocketmq-client-python "$RMQCP_VERSION"
install_wheel "$dest/venv-rmq044" rocketmq "$RMQ044_VERSION"
"$dest/venv-rmq044/bin/python" -c 'from rocketmq.client import Producer; assert hasattr(Producer, "send_batch")' \
  || die "rocketmq==$RMQ044_VERSION has no Producer.send_batch"

# The 5.x gRPC client (apache.rocketmq.v2) and grpcio-tools' protoc: the proxy's wire contract is checked against it.
rmq5="$dest/venv-rmq5"
make_venv "$rmq5"
if "$rmq5/bin/python" -c "from importlib.metadata import version as v; import sys; \
sys.exit(v('rocketmq-python-client') != '$RMQ5_VERSION' or v('grpcio-tools') != '$GRPC_TOOLS_VERSION')" 2>/dev/null; then
  log "ok   venv-rmq5: rocketmq-python-client==$RMQ5_VERSION, grpcio-tools==$GRPC_TOOLS_VERSION already installed"
else
  log "pip install rocketmq-python-client==$RMQ5_VERSION grpcio-tools==$GRPC_TOOLS_VERSION into $rmq5"
  "$rmq5/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    "rocketmq-python-client==$RMQ5_VERSION" "grpcio-tools==$GRPC_TOOLS_VERSION" \
    || die "pip install rocketmq-python-client==$RMQ5_VERSION failed"
fi
"$rmq5/bin/python" -c 'from rocketmq.grpc_protocol import service_pb2; import grpc_tools.protoc' \
  || die "import of the 5.x client's protocol or of grpc_tools failed in $rmq5"
log "ok   venv-rmq5: the 5.x client's protocol modules and protoc import"

# ------------------------------------------------------------------------------------------- node
if ! command -v node >/dev/null 2>&1; then
  apt_install nodejs npm
elif ! command -v npm >/dev/null 2>&1; then
  apt_install npm
fi
log "node $(node --version), npm $(npm --version)"

node_dir="$dest/node"
mkdir -p "$node_dir"
have_ons="$(node -e "try{process.stdout.write(require('$node_dir/node_modules/ali-ons/package.json').version)}catch(e){}" 2>/dev/null || true)"
if [[ "$have_ons" == "$ALI_ONS_VERSION" ]] && (cd "$node_dir" && node -e "require('ali-ons')" >/dev/null 2>&1); then
  log "ok   node: ali-ons@$ALI_ONS_VERSION already installed"
else
  if [[ ! -f "$node_dir/package.json" ]]; then
    printf '{\n  "name": "sievemq-interop-clients",\n  "private": true,\n  "version": "0.0.0"\n}\n' \
      > "$node_dir/package.json"
  fi
  log "npm install ali-ons@$ALI_ONS_VERSION in $node_dir (had: ${have_ons:-nothing})"
  (cd "$node_dir" && npm install --no-audit --no-fund --save-exact --loglevel=error "ali-ons@$ALI_ONS_VERSION") \
    || die "npm install ali-ons@$ALI_ONS_VERSION failed"
fi
(cd "$node_dir" && node -e "require('ali-ons')") || die "node -e \"require('ali-ons')\" failed in $node_dir"
log "ok   node: require('ali-ons') works ($(node -e "process.stdout.write(require('$node_dir/node_modules/ali-ons/package.json').version)"))"

# The Node.js 5.x gRPC client, in its own directory (its @grpc/grpc-js and google-protobuf stay apart from ali-ons').
node5_dir="$dest/node-rmq5"
mkdir -p "$node5_dir"
have_node5="$(node -e "try{process.stdout.write(require('$node5_dir/node_modules/rocketmq-client-nodejs/package.json').version)}catch(e){}" 2>/dev/null || true)"
if [[ "$have_node5" == "$RMQ5_NODE_VERSION" ]] && (cd "$node5_dir" && node -e "require('rocketmq-client-nodejs')" >/dev/null 2>&1); then
  log "ok   node-rmq5: rocketmq-client-nodejs@$RMQ5_NODE_VERSION already installed"
else
  if [[ ! -f "$node5_dir/package.json" ]]; then
    printf '{\n  "name": "sievemq-interop-rmq5-node",\n  "private": true,\n  "version": "0.0.0"\n}\n' \
      > "$node5_dir/package.json"
  fi
  log "npm install rocketmq-client-nodejs@$RMQ5_NODE_VERSION in $node5_dir (had: ${have_node5:-nothing})"
  (cd "$node5_dir" && npm install --no-audit --no-fund --save-exact --loglevel=error \
    "rocketmq-client-nodejs@$RMQ5_NODE_VERSION") || die "npm install rocketmq-client-nodejs@$RMQ5_NODE_VERSION failed"
fi
# Loading the package loads its native CRC32 binding (@node-rs/crc32) and the generated protobuf modules.
(cd "$node5_dir" && node -e "const m = require('rocketmq-client-nodejs'); if (!m.SimpleConsumer || !m.PushConsumer || !m.Producer) process.exit(1); require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb')") \
  || die "node -e \"require('rocketmq-client-nodejs')\" failed in $node5_dir"
log "ok   node-rmq5: require('rocketmq-client-nodejs') works ($(node -e "process.stdout.write(require('$node5_dir/node_modules/rocketmq-client-nodejs/package.json').version)"))"

# Apache RocketMQ's Java remoting client (rocketmq-client 4.9.8 and 5.5.0) under our Java driver (kinds java4, java5).
# (started at the top, beside the Python and Node.js installs)
wait "$java_builds" || die "building the Java drivers (rocketmq-client, rocketmq-client-java) failed"
wait "$go_build" || die "building the Go client's driver failed"

date -u +%Y-%m-%dT%H:%M:%SZ > "$dest/.setup-ok"
log "done: clients installed under $dest"
