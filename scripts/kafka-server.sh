#!/usr/bin/env bash
# An Apache Kafka broker for the tests: one JVM in KRaft mode (broker and controller in
# one node, no ZooKeeper), loopback only, plaintext, no authentication, its data under a
# directory of its own.
#
#   scripts/kafka-server.sh start DIR PORT   # prints the bootstrap address, 127.0.0.1:PORT
#   scripts/kafka-server.sh stop DIR         # stops it; keeps DIR; idempotent
#
# start on a DIR that an earlier start used (stopped or not: a broker still running there
# is stopped first) brings the broker back on the same data: topics, their records and
# committed consumer offsets survive a stop and start, which is how a test restarts the
# broker mid-run. stop leaves DIR alone: the caller deletes it when done.
# A caller that restarts the broker should give a PORT outside the kernel's ephemeral
# range (tests/support/ports.py): while the broker is down, any outgoing connection may
# get an ephemeral PORT as its local port, and then the broker cannot bind it (start
# then fails at once, saying so, instead of retrying).
#
# The first start on DIR formats DIR/data (the log dir, which also holds the KRaft
# metadata log) with a random cluster id; later starts find it formatted and keep it.
# Each start writes DIR/server.properties:
#   - node 1, process.roles=broker,controller, a static quorum of itself
#     (controller.quorum.voters=1@127.0.0.1:CPORT);
#   - listeners PLAINTEXT://127.0.0.1:PORT (advertised as such) and
#     CONTROLLER://127.0.0.1:CPORT, where CPORT is a free loopback port that the kernel
#     hands out at the first start and that later starts reuse while it is free
#     (DIR/controller-port); no other port is opened (no JMX port);
#   - auto.create.topics.enable=true, num.partitions=4, and replication factor 1 / min ISR
#     1 for the internal topics (__consumer_offsets, __transaction_state, the share-group
#     state), with 4 partitions each and no initial rebalance delay, so that a first
#     consumer group or transaction does not wait long.
# The JVM runs with -Xmx512m; its log (slf4j-simple on stderr, INFO) is DIR/kafka.log,
# appended to across starts (each start's first line marked), its pid DIR/kafka.pid.
# start returns once the broker has logged "Kafka Server started" (it then has its
# metadata and is unfenced) and PORT accepts connections: about 3 s here, with the jars
# fetched; about 12 s after the broker was SIGKILLed, as the controller first waits out
# the dead broker's session (broker.session.timeout.ms, 9 s). stop sends SIGTERM (a
# controlled shutdown, under a second here) and waits up to 30 s before SIGKILL.
#
# The broker comes from Maven Central: org.apache.kafka:kafka_2.13 (pinned below; the
# server's main class kafka.Kafka, the format tool kafka.tools.StorageTool) and
# org.slf4j:slf4j-simple for its log, with their runtime dependencies, fetched by
# `mvn dependency:copy-dependencies` on a pom that this script writes to
# .cache/kafka/pom.xml, into .cache/kafka/lib at the repository root; again only when
# that pom changes. Needs java 17 or newer, mvn, and python3.
set -euo pipefail

KAFKA_VERSION=4.2.0
SLF4J_VERSION=1.7.36 # the slf4j-api 1.x line that kafka_2.13 depends on
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

cmd="${1:?usage: kafka-server.sh start DIR PORT | stop DIR}"
dir="${2:?directory required}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
home="$root/.cache/kafka"
lib="$home/lib"

# shellcheck source=scripts/service.sh
source "$root/scripts/service.sh"

# Our broker is the process in DIR/kafka.pid whose command line names
# DIR/server.properties (a recycled pid does not count).
stop_server() {
  service_stop "$dir/kafka.pid" "$dir/server.properties" 30
}

java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1
}

write_pom() {
  cat <<XML
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by scripts/kafka-server.sh: the jars of a Kafka broker. -->
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>floe.test</groupId>
  <artifactId>kafka-server</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
XML
}

# The jars into .cache/kafka/lib, unless the stamp there says they came from this very
# pom. They go to a temporary directory first, so that an interrupted download is not
# taken for a complete one; a lock keeps two starts from fetching at once.
install_kafka() {
  local pom="$home/pom.xml" stamp="$lib/.complete" sum tmp t0=$SECONDS
  mkdir -p "$home"
  exec 9>"$home/.lock"
  flock 9
  sum="$(write_pom | sha256sum | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" && -f "$lib/kafka_2.13-$KAFKA_VERSION.jar" ]]; then
    exec 9>&-
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || { echo "mvn is needed to fetch Kafka" >&2; return 1; }
  echo "fetching kafka_2.13 $KAFKA_VERSION from Maven Central into $lib" >&2
  write_pom >"$pom"
  rm -rf "$home"/lib.tmp.*
  tmp="$(mktemp -d "$home/lib.tmp.XXXXXX")"
  # (sed: Maven 3.8 prints colour resets even with style.color=never)
  if ! mvn -q -B -Dstyle.color=never -f "$pom" "$DEPENDENCY_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$tmp" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >&2; then
    rm -rf "$tmp"
    return 1
  fi
  [[ -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" ]] || { echo "kafka_2.13 jar missing after download" >&2; rm -rf "$tmp"; return 1; }
  printf '%s\n' "$sum" >"$tmp/.complete"
  rm -rf "$lib"
  mv "$tmp" "$lib"
  echo "fetched $(find "$lib" -name '*.jar' | wc -l) jars in $((SECONDS - t0))s" >&2
  exec 9>&-
}

# The JVM's options for both the format tool and the broker.
java_opts() {
  printf '%s\n' -Xms128m -Xmx512m -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData \
    -Djava.awt.headless=true \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd\'T\'HH:mm:ss.SSS \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients=warn \
    -cp "$lib/*"
}

# The controller port: the one the last start used while it is free, else a new one.
pick_controller_port() {
  local cport
  cport="$(cat "$dir/controller-port" 2>/dev/null || true)"
  if [[ ! "$cport" =~ ^[0-9]+$ || "$cport" == "$port" ]] || service_port_open 127.0.0.1 "$cport"; then
    cport="$(service_free_port "$port")"
  fi
  echo "$cport" >"$dir/controller-port"
}

write_config() {
  local cport
  cport="$(cat "$dir/controller-port")"
  cat >"$dir/server.properties" <<PROPS
# Written by scripts/kafka-server.sh at each start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=4
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
}

# Formats DIR/data once, with a random cluster id (22 characters of URL-safe base64, not
# starting with '-').
format_once() {
  [[ -f "$dir/data/meta.properties" ]] && return 0
  local cluster_id opts
  # A leading '-' would be read as an option by the storage tool: such an id (one in 64:
  # the first 6 bits are 62) is drawn again.
  cluster_id="$(python3 -c 'import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not s.startswith("-"):
        print(s)
        break')"
  mapfile -t opts < <(java_opts)
  echo "formatting $dir/data (cluster id $cluster_id)" >>"$dir/kafka.log"
  java "${opts[@]}" kafka.tools.StorageTool format --cluster-id "$cluster_id" \
    --config "$dir/server.properties" --ignore-formatted >>"$dir/kafka.log" 2>&1 \
    || { service_fail "$dir/kafka.log" "could not format $dir/data"; return 1; }
}

# True if this start's part of DIR/kafka.log (from line $log_from on) has a line holding
# TEXT (service_log_has says why it is not `tail | grep -q`).
log_since_start_has() {
  service_log_has "$dir/kafka.log" "$log_from" "$1"
}

# One look for service_wait: 0 once this start's part of the log says "Kafka Server
# started" and PORT takes a connection, 1 otherwise (any other status would end the wait
# at once). A broker that cannot start exits, which ends the wait.
ready_check() {
  log_since_start_has 'Kafka Server started' && service_port_open 127.0.0.1 "$port"
}

case "$cmd" in
  start)
    port="${3:?port required}"
    service_port_arg "$port"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    stop_server
    command -v java >/dev/null 2>&1 || { echo "java (17 or newer) is needed" >&2; exit 1; }
    java_version="$(java_major)"
    if [[ ! "$java_version" =~ ^[0-9]+$ ]] || ((java_version < 17)); then
      echo "Kafka $KAFKA_VERSION needs java 17 or newer" >&2
      exit 1
    fi
    service_port_open 127.0.0.1 "$port" && { echo "127.0.0.1:$port is taken" >&2; exit 1; }
    install_kafka || { echo "could not fetch Kafka $KAFKA_VERSION" >&2; exit 1; }
    mkdir -p "$dir/data"
    # Another process may take the controller port before the broker binds it: then a
    # new one is tried (but PORT itself is the caller's).
    for attempt in 1 2 3; do
      printf '=== %s start on port %s\n' "$(date -u +%FT%TZ)" "$port" >>"$dir/kafka.log"
      log_from="$(wc -l <"$dir/kafka.log")"
      pick_controller_port
      write_config
      format_once || exit 1
      mapfile -t opts < <(java_opts)
      service_launch -a "$dir/kafka.pid" "$dir/kafka.log" \
        java "${opts[@]}" kafka.Kafka "$dir/server.properties"
      if SERVICE_WAIT_INTERVAL=0.25 service_wait 120 "$dir/kafka.pid" "$dir/server.properties" ready_check; then
        echo "127.0.0.1:$port"
        exit 0
      fi
      if service_pid "$dir/kafka.pid" "$dir/server.properties" >/dev/null; then
        why="still not started after 120 s: stopped"
      else
        why="the broker exited"
      fi
      stop_server
      # PORT itself taken by a socket that does not listen (an outgoing connection's
      # local port, or its TIME_WAIT: the kernel hands out ports of its ephemeral range
      # for those) will not come free by trying again soon.
      if log_since_start_has "failed to bind to 127.0.0.1:$port:"; then
        break
      fi
      if ((attempt < 3)) && log_since_start_has 'BindException' \
        && ! service_port_open 127.0.0.1 "$port"; then
        rm -f "$dir/controller-port"
        continue
      fi
      break
    done
    service_fail "$dir/kafka.log" "Kafka did not come up on 127.0.0.1:$port ($why)"
    # The log ends in the shutdown that followed: the first errors before it say why,
    # last here so that a caller showing only the end of this output shows them.
    echo "first errors of this start, before its shutdown ($why):" >&2
    awk -v from="$log_from" 'NR < from { next } /kafka-shutdown-hook/ { exit }
      / ERROR |Exception/ { print; if (++n == 5) exit }' "$dir/kafka.log" >&2
    exit 1
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    dir="$(cd "$dir" && pwd)"
    stop_server
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
