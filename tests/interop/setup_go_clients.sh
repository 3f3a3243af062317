#!/usr/bin/env bash
# Build the Go interop driver (tests/interop/drivers/go) against Apache RocketMQ's Go client
# github.com/apache/rocketmq-client-go/v2, at the version its go.mod requires, from the Go module proxy:
#   $INTEROP_DIR/go-rocketmq-client-VERSION/driver     the driver (one static binary)
#   $INTEROP_DIR/go-path/, $INTEROP_DIR/go-cache/      the module cache and build cache it was built with
# (INTEROP_DIR defaults to <repo>/.interop, gitignored). Tests run it directly (tests/interop/test_go_clients.py).
# Idempotent: a build is kept while the driver's sources, go.mod, go.sum and the Go toolchain are unchanged (their
# hash is in .complete). Safe to run from parallel pytest workers (a file lock). Needs go (1.19+) on PATH; as root
# on Debian it installs golang-go when there is none.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
dest="${INTEROP_DIR:-$repo_root/.interop}"
src="$here/drivers/go"
log() { printf '[setup_go_clients] %s\n' "$*"; }
die() { printf '[setup_go_clients] ERROR: %s\n' "$*" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
  if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
    log "go is not on PATH: apt-get install golang-go"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go ca-certificates
  fi
  command -v go >/dev/null 2>&1 || die "go is not on PATH (the driver needs Go 1.19 or newer)"
fi
version="$(awk '$1 == "require" && $2 == "github.com/apache/rocketmq-client-go/v2" { print $3 }' "$src/go.mod")"
[[ -n "$version" ]] || die "no 'require github.com/apache/rocketmq-client-go/v2 VERSION' line in $src/go.mod"
out="$dest/go-rocketmq-client-$version"

mkdir -p "$dest"
exec 7>"$dest/.go-clients.lock"
flock -w 900 7 || die "could not take $dest/.go-clients.lock within 900 s"

# Everything Go writes stays under $INTEROP_DIR (a clean machine, a read-only home); -modcacherw keeps the module
# cache deletable; -mod=mod lets go resolve what go.sum lacks; the local toolchain is used, never a downloaded one.
export GOPATH="$dest/go-path" GOCACHE="$dest/go-cache" GOFLAGS="-mod=mod -modcacherw" GOTOOLCHAIN=local
export CGO_ENABLED=0 GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"
stamp="$( (cd "$src" && find . -maxdepth 1 -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 \
  | sort -z | xargs -0 sha256sum; go version) | sha256sum | cut -c1-16)"
if [[ -x "$out/driver" && -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp" ]]; then
  log "ok rocketmq-client-go $version ($out/driver)"
  exit 0
fi
log "building the driver against rocketmq-client-go $version with $(go version) into $out"
rm -rf "$out"
mkdir -p "$out"
(cd "$src" && go build -trimpath -o "$out/driver.tmp" .) || die "go build of the driver failed (rocketmq-client-go $version)"
# The driver must start and refuse a bad command line with its usage code (2).
set +e
"$out/driver.tmp" produce >/dev/null 2>&1
code=$?
set -e
[[ "$code" == 2 ]] || die "the driver built against rocketmq-client-go $version does not start (exit $code, expected 2)"
mv "$out/driver.tmp" "$out/driver"
echo "$stamp" > "$out/.complete"
log "ok rocketmq-client-go $version ($out/driver)"
