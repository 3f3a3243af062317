#!/usr/bin/env bash
# Resolve Apache RocketMQ itself (name server, broker, proxy, mqadmin) from Maven Central for the compatibility
# tests (tests/compat/, docs/compat.md): the jars and their dependencies are copied into
#   $INTEROP_DIR/rocketmq-VERSION/lib/        (INTEROP_DIR defaults to <repo>/.interop, gitignored)
# Nothing is built; the tests run the jars with `java -cp 'lib/*' org.apache.rocketmq...Startup`.
# Idempotent (a finished install has lib/.complete) and safe to run from parallel pytest workers (a file lock).
# Needs java (17) and mvn on PATH; RocketMQ's own versions: ROCKETMQ_VERSIONS (default "5.5.0 4.9.7": the newest,
# and the last with the plain ACL, whose name server and broker Maven Central serves whole).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
dest="${INTEROP_DIR:-$repo_root/.interop}"
versions="${ROCKETMQ_VERSIONS:-5.5.0 4.9.7}"
log() { printf '[setup_reference] %s\n' "$*"; }
die() { printf '[setup_reference] ERROR: %s\n' "$*" >&2; exit 1; }

command -v java >/dev/null || die "java is not on PATH (Apache RocketMQ runs on Java 8-17; CI machines have 17)"
command -v mvn >/dev/null || die "mvn is not on PATH (Maven resolves Apache RocketMQ from Maven Central)"
mkdir -p "$dest"
exec 9>"$dest/.reference.lock"
flock -w 900 9 || die "could not take $dest/.reference.lock within 900 s"

for v in $versions; do
  lib="$dest/rocketmq-$v/lib"
  if [[ -f "$lib/.complete" ]]; then
    log "ok rocketmq $v ($(ls "$lib" | wc -l) jars in $lib)"
    continue
  fi
  rm -rf "$lib"
  extra=()
  case "$v" in 4.*) extra+=(-DnoProxy) ;; esac  # RocketMQ 4 has no proxy
  log "resolving Apache RocketMQ $v from Maven Central into $lib"
  # A Maven repository of its own: scripts/test.sh runs this beside the interop drivers' Maven builds.
  mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$dest/m2-reference" -f "$here/reference/pom.xml" \
    -Drocketmq.version="$v" "${extra[@]}" \
    dependency:copy-dependencies -DoutputDirectory="$lib" -DincludeScope=runtime \
    || die "maven could not resolve Apache RocketMQ $v"
  ls "$lib"/rocketmq-broker-"$v".jar >/dev/null || die "rocketmq-broker-$v.jar missing from $lib"
  touch "$lib/.complete"
  log "ok rocketmq $v ($(ls "$lib" | wc -l) jars)"
done

# Our own drivers (tests/compat/drivers/*.java, e.g. MqAdminBatch: many mqadmin commands in one JVM), compiled
# against each 5.x version's jars into $INTEROP_DIR/rocketmq-VERSION/drivers; again when a .java is newer.
for v in $versions; do
  case "$v" in 5.*) ;; *) continue ;; esac
  out="$dest/rocketmq-$v/drivers"
  for src in "$here"/drivers/*.java; do
    [[ -e "$src" ]] || continue
    cls="$out/$(basename "$src" .java).class"
    if [[ -f "$cls" && "$cls" -nt "$src" ]]; then
      continue
    fi
    command -v javac >/dev/null || die "javac is not on PATH (a JDK 17 compiles tests/compat/drivers)"
    mkdir -p "$out"
    javac -nowarn -encoding UTF-8 -d "$out" -cp "$dest/rocketmq-$v/lib/*" "$src" \
      || die "could not compile $src against rocketmq $v"
    log "compiled $(basename "$src") for rocketmq $v into $out"
  done
done
