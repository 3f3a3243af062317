#!/usr/bin/env bash
# Build the Java interop driver (tests/interop/drivers/java) against Apache RocketMQ's 4.x remoting client
# rocketmq-client, once per client version, from Maven Central:
#   $INTEROP_DIR/java-rocketmq-client-VERSION/driver.jar  the driver (io.sievemq.interop.Driver)
#   $INTEROP_DIR/java-rocketmq-client-VERSION/lib/        rocketmq-client VERSION and its runtime dependencies only
#   $INTEROP_DIR/java-rocketmq-client-VERSION/driver.jsa  a class-data-sharing archive of a warm-up run (a JVM
#                                                         starts the driver in half the time with it)
# (INTEROP_DIR defaults to <repo>/.interop, gitignored). Tests run it with
#   java -cp 'driver.jar:lib/*' io.sievemq.interop.Driver ...   (tests/interop/clients.py, kinds java4 and java5)
# Idempotent: a build is kept while the driver's sources and pom are unchanged (their hash is in .complete). Safe to
# run from parallel pytest workers (a file lock). Needs java (8+; CI has 17) and mvn on PATH.
# Versions: JAVA_CLIENT_VERSIONS (default "4.9.8 5.5.0"; Maven Central serves 4.9.8 as the last 4.9.x).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
dest="${INTEROP_DIR:-$repo_root/.interop}"
src="$here/drivers/java"
versions="${JAVA_CLIENT_VERSIONS:-4.9.8 5.5.0}"
log() { printf '[setup_java_clients] %s\n' "$*"; }
die() { printf '[setup_java_clients] ERROR: %s\n' "$*" >&2; exit 1; }

command -v java >/dev/null || die "java is not on PATH (the drivers run on Java 8+; CI machines have 17)"
command -v mvn >/dev/null || die "mvn is not on PATH (Maven resolves rocketmq-client from Maven Central)"
mkdir -p "$dest"
exec 8>"$dest/.java-clients.lock"
flock -w 900 8 || die "could not take $dest/.java-clients.lock within 900 s"

# The JVM options of clients.py's JAVA_OPTIONS: a class-data-sharing archive is only used with matching ones.
jvm=(-Xms32m -Xmx160m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Djava.net.preferIPv4Stack=true)
stamp="$( (cd "$src" && find pom.xml src -type f -print0 | sort -z | xargs -0 sha256sum; java -version 2>&1) \
  | sha256sum | cut -c1-16)"
for v in $versions; do
  out="$dest/java-rocketmq-client-$v"
  if [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp" ]]; then
    log "ok rocketmq-client $v ($(ls "$out/lib" | wc -l) jars in $out/lib)"
    continue
  fi
  rm -rf "$out"
  extra=()
  case "$v" in 4.*) ;; *) extra+=(-Drocketmq5) ;; esac  # 5.x has AclClientRPCHook in rocketmq-client itself
  log "building the driver against rocketmq-client $v into $out"
  mvn -q -B -Dstyle.color=never -f "$src/pom.xml" -Drocketmq.client.version="$v" -Ddriver.out="$out" "${extra[@]}" \
    package || die "maven could not build the driver against rocketmq-client $v"
  rm -rf "$out/build"
  [[ -f "$out/driver.jar" && -f "$out/lib/rocketmq-client-$v.jar" ]] || die "driver.jar or rocketmq-client-$v.jar missing"
  # The driver must start and refuse a bad command line with its usage code (2), on this client's classpath.
  set +e
  (cd "$out" && java -cp "driver.jar:lib/*" io.sievemq.interop.Driver produce >/dev/null 2>&1)
  code=$?
  set -e
  [[ "$code" == 2 ]] || die "the driver built against rocketmq-client $v does not start (exit $code, expected 2)"
  # Every client kind started once against a closed port (127.0.0.1:1); the classes it loaded go to driver.jsa.
  warm="$(mktemp -d)"
  (cd "$warm" && java "${jvm[@]}" -XX:ArchiveClassesAtExit="$out/driver.jsa" -cp "$out/driver.jar:$out/lib/*" \
    io.sievemq.interop.Driver warmup --namesrv 127.0.0.1:1 --topic Warmup --group Warmup --trace \
    --access-key warmup --secret-key warmup >/dev/null 2>"$warm/stderr") \
    || die "the driver's warm-up run failed: $(tail -20 "$warm/stderr")"
  rm -rf "$warm"
  [[ -s "$out/driver.jsa" ]] || die "no class-data-sharing archive was written"
  echo "$stamp" > "$out/.complete"
  log "ok rocketmq-client $v ($(ls "$out/lib" | wc -l) jars)"
done
