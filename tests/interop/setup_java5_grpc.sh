#!/usr/bin/env bash
# Build the interop driver of Apache RocketMQ's Java 5.x gRPC client rocketmq-client-java (tests/interop/drivers/
# java5grpc), which talks to sievemq's gRPC proxy, once per client version, from Maven Central:
#   $INTEROP_DIR/java-rocketmq-client-java-VERSION/driver.jar  the driver (io.sievemq.interop5.Driver5)
#   $INTEROP_DIR/java-rocketmq-client-java-VERSION/lib/        rocketmq-client-java VERSION (a shaded jar) and its
#                                                              runtime dependencies only
# (INTEROP_DIR defaults to <repo>/.interop, gitignored). tests/interop/test_java5_grpc.py runs it with
#   java -cp 'driver.jar:lib/*' io.sievemq.interop5.Driver5 ...
# Idempotent: a build is kept while the driver's sources and pom are unchanged (their hash is in .complete). Safe to
# run from parallel pytest workers (a file lock). Needs java (8+; CI has 17) and mvn on PATH.
# Versions: JAVA5_GRPC_VERSIONS (default "5.0.8", the newest 5.0.x on Maven Central; it logs nothing, an upstream
# defect, apache/rocketmq-clients#1022: 5.0.7 writes logs/rocketmq/rocketmq-client.log in the run's directory).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
dest="${INTEROP_DIR:-$repo_root/.interop}"
src="$here/drivers/java5grpc"
versions="${JAVA5_GRPC_VERSIONS:-5.0.8}"
log() { printf '[setup_java5_grpc] %s\n' "$*"; }
die() { printf '[setup_java5_grpc] ERROR: %s\n' "$*" >&2; exit 1; }

command -v java >/dev/null || die "java is not on PATH (the driver runs on Java 8+; CI machines have 17)"
command -v mvn >/dev/null || die "mvn is not on PATH (Maven resolves rocketmq-client-java from Maven Central)"
mkdir -p "$dest"
exec 7>"$dest/.java5-grpc.lock"
flock -w 900 7 || die "could not take $dest/.java5-grpc.lock within 900 s"

stamp="$( (cd "$src" && find pom.xml src -type f -print0 | sort -z | xargs -0 sha256sum; java -version 2>&1) \
  | sha256sum | cut -c1-16)"
for v in $versions; do
  out="$dest/java-rocketmq-client-java-$v"
  if [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp" ]]; then
    log "ok rocketmq-client-java $v ($(ls "$out/lib" | wc -l) jars in $out/lib)"
    continue
  fi
  rm -rf "$out"
  log "building the driver against rocketmq-client-java $v into $out"
  mvn -q -B -Dstyle.color=never -f "$src/pom.xml" -Drocketmq.client.java.version="$v" -Ddriver.out="$out" package \
    || die "maven could not build the driver against rocketmq-client-java $v"
  rm -rf "$out/build"
  [[ -f "$out/driver.jar" && -f "$out/lib/rocketmq-client-java-$v.jar" ]] \
    || die "driver.jar or rocketmq-client-java-$v.jar missing"
  # The driver must start and refuse a bad command line with its usage code (2), on this client's classpath.
  set +e
  (cd "$out" && java -cp "driver.jar:lib/*" io.sievemq.interop5.Driver5 produce >/dev/null 2>&1)
  code=$?
  set -e
  [[ "$code" == 2 ]] || die "the driver built against rocketmq-client-java $v does not start (exit $code, expected 2)"
  echo "$stamp" > "$out/.complete"
  log "ok rocketmq-client-java $v ($(ls "$out/lib" | wc -l) jars)"
done
