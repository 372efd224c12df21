#!/usr/bin/env bash
# Real servers for the integration suites, on loopback, from Debian 12's packages, as root, without
# systemd (CI containers, throwaway dev machines).
#
#   scripts/services.sh install [SERVICE...]   apt-get the packages (skipped when all are there)
#   scripts/services.sh start   [SERVICE...]   start them (a running one is left alone), wait until
#                                              ready, print their URLs as QM_TEST_*=... lines
#   scripts/services.sh stop    [SERVICE...]   stop them, by the pid recorded at start
#   scripts/services.sh restart [SERVICE...]   stop, then start again keeping the data (nats,
#                                              redis: what a broker restart test needs)
#
# SERVICE: postgres redis nats rabbitmq etcd prometheus kafka tansu apache-kafka; none named means
# all of them.
# State, data, logs and pids live in ${QM_SERVICES_DIR:-/tmp/qm-services}; every start of a
# service that is not running begins from empty data (these are throwaway servers).
# "$QM_SERVICES_DIR/env" holds `export QM_TEST_...=...` lines for the services that were started.
#
#   postgres    PostgreSQL 15, port 5432, trust auth, TLS on (snakeoil cert) when available
#   redis       Redis 7.0, port 6379, append-only file fsynced on every write (survives restart)
#   nats        NATS 2.9 with JetStream, client 4222, monitoring 8222
#   rabbitmq    RabbitMQ 3.10 (+ its own epmd on loopback), AMQP 5672, management 15672 (guest),
#               Prometheus metrics 15692 with per-queue series; plugins management, prometheus,
#               shovel. Writes /etc/rabbitmq/rabbitmq-env.conf and rabbitmq.conf (the Debian
#               wrapper runs the server as the rabbitmq user and reads its settings from there).
#               QM_TEST_RABBITMQCTL names the rabbitmqctl that reaches it (a test sets an alarm).
#   etcd        etcd 3.4, client 2379 (+ v3 JSON gateway), peer 2380, metrics 2381
#   prometheus  Prometheus 2.42, port 9090, scrapes itself and RabbitMQ every second
#   kafka       librdkafka's mock cluster (3 brokers, random loopback ports) in `qm-kafka-mock`,
#               built here with `cargo build --all-features` (the build .ci/run tests; install:
#               the C toolchain and zlib librdkafka's bundled build needs);
#               QM_TEST_KAFKA_BOOTSTRAP, and QM_TEST_KAFKA_CONTROL (its control port:
#               `topic NAME PARTITIONS`, `leader TOPIC PARTITION ID`, `down ID`, `up ID`)
#   tansu       Tansu 0.6.0, a second Kafka-protocol broker (Apache-2.0, Rust): one broker on
#               127.0.0.1:${QM_TANSU_PORT:-19092}, in-memory storage; QM_TEST_TANSU_BOOTSTRAP. Install:
#               `cargo install --locked tansu@0.6.0 --features dynostore` when `tansu` is not on
#               PATH (about 8 minutes on 2 cores, once; a C compiler for aws-lc, zstd, lz4)
#   apache-kafka  Apache Kafka 4.4 (the real broker, Java 17), KRaft combined mode (broker and
#               controller in one JVM, -Xmx512m), from Maven Central only: install copies the
#               runtime classpath of scripts/apache-kafka/pom.xml into $SVC/apache-kafka/lib
#               (Maven's ~/.m2 is its cache; no bin/ scripts: start runs `kafka.Kafka` and
#               `kafka.tools.StorageTool` from that classpath). Install: a JDK, Maven, openssl.
#               Listeners on 127.0.0.1 from ${QM_APACHE_KAFKA_PORT:-39092}: PLAINTEXT (+0),
#               SASL_SSL (+1: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with unsecured
#               tokens), SSL requiring a client certificate (+2), the controller (+3). Start makes
#               a CA, the broker's and a client's certificates (openssl) and the broker's PKCS12
#               stores (keytool), formats the storage with the SCRAM users, and is ready when a
#               metadata request (TopicCommand --list) answers on PLAINTEXT.
#               QM_TEST_APACHE_KAFKA_BOOTSTRAP, _SASL_BOOTSTRAP, _SASL_USER, _SASL_PASSWORD,
#               _CA (PEM), _MTLS_BOOTSTRAP, _CLIENT_CERT, _CLIENT_KEY (PEM), _LIB (the classpath
#               directory: kafka-clients for the Java producer of the key placement test)
set -euo pipefail

SVC=${QM_SERVICES_DIR:-/tmp/qm-services}
PG=/usr/lib/postgresql/15/bin
ALL=(postgres redis nats rabbitmq etcd prometheus kafka tansu apache-kafka)
TANSU_PORT=${QM_TANSU_PORT:-19092}
TANSU_VERSION=0.6.0
AK_PORT=${QM_APACHE_KAFKA_PORT:-39092}
AK=$SVC/apache-kafka
# the SASL user: PLAIN (in the listener's JAAS line) and SCRAM-SHA-256/512 (added at format time)
AK_USER=qm-client
AK_PASSWORD=qm-client-secret

usage() {
  echo "usage: $0 install|start|stop|restart [SERVICE...]   (SERVICE: ${ALL[*]}; default: all)" >&2
  exit 2
}

log() { echo "services: $*" >&2; }

# ---- helpers ---------------------------------------------------------------------------------

alive() {  # alive PID: running and not a zombie (PID 1 in a container may reap lazily)
  [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" != Z ]
}

pid_of() { if [ -f "$SVC/$1.pid" ]; then cat "$SVC/$1.pid"; fi; }

# bg NAME CMD...: start CMD detached (own session, stdin closed), output to NAME.log, pid to NAME.pid
bg() {
  local name=$1; shift
  setsid "$@" </dev/null >"$SVC/$name.log" 2>&1 &
  echo $! >"$SVC/$name.pid"
}

# wait_for NAME TIMEOUT_S CMD...: poll CMD until it succeeds; on timeout show the log tail
wait_for() {
  local name=$1 t=$2 s=$SECONDS; shift 2
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS - s >= t )); then
      log "$name: not ready after ${t}s; last lines of its log:"
      tail -n 20 "$(log_of "$name")" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.2
  done
  log "$name ready ($(( SECONDS - s ))s)"
}

log_of() {
  case $1 in
    postgres) echo "$SVC/pg/pg.log" ;;
    *) echo "$SVC/$1.log" ;;
  esac
}

# stop_pids PID...: TERM, wait up to 30 s, then KILL what is left
stop_pids() {
  local p pids=()
  for p in "$@"; do
    alive "$p" && kill "$p" 2>/dev/null && pids+=("$p")
  done
  (( ${#pids[@]} )) || return 0
  for _ in $(seq 300); do
    local left=0
    for p in "${pids[@]}"; do alive "$p" && left=1; done
    (( left )) || return 0
    sleep 0.1
  done
  for p in "${pids[@]}"; do alive "$p" && kill -9 "$p" 2>/dev/null; done
  return 0
}

# ---- per service: packages, running?, start, ready, URLs, stop ---------------------------------

packages() {
  case $1 in
    postgres) echo "postgresql-15 ssl-cert" ;;
    redis) echo "redis-server redis-tools" ;;
    nats) echo "nats-server curl" ;;
    rabbitmq) echo "rabbitmq-server curl" ;;
    etcd) echo "etcd-server etcd-client curl" ;;
    prometheus) echo "prometheus curl" ;;
    kafka) echo "gcc libc6-dev make pkg-config zlib1g-dev libssl-dev" ;;
    tansu) echo "gcc g++ libc6-dev make" ;;
    apache-kafka) echo "openjdk-17-jdk-headless maven openssl" ;;
  esac
}

binary() {
  case $1 in
    postgres) echo "$PG/postgres" ;;
    redis) echo redis-server ;;
    nats) echo nats-server ;;
    rabbitmq) echo rabbitmq-server ;;
    etcd) echo etcd ;;
    prometheus) echo prometheus ;;
    kafka) echo cargo ;;
    tansu) echo tansu ;;
    apache-kafka) echo java ;;
  esac
}

running() {
  case $1 in
    postgres) [ -f "$SVC/pg/data/postmaster.pid" ] && alive "$(head -n 1 "$SVC/pg/data/postmaster.pid")" ;;
    rabbitmq) alive "$(pid_of beam)" || alive "$(pid_of rabbitmq)" ;;
    *) alive "$(pid_of "$1")" ;;
  esac
}

urls() {
  case $1 in
    postgres) echo "QM_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres" ;;
    redis) echo "QM_TEST_REDIS_URL=redis://127.0.0.1:6379" ;;
    nats)
      echo "QM_TEST_NATS_URL=nats://127.0.0.1:4222"
      echo "QM_TEST_NATS_MONITOR_URL=http://127.0.0.1:8222"
      ;;
    rabbitmq)
      echo "QM_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f"
      echo "QM_TEST_RABBITMQ_API_URL=http://guest:guest@127.0.0.1:15672/api"
      echo "QM_TEST_RABBITMQ_METRICS_URL=http://127.0.0.1:15692/metrics"
      echo "QM_TEST_RABBITMQCTL=$(command -v rabbitmqctl || echo /usr/sbin/rabbitmqctl)"
      ;;
    etcd) echo "QM_TEST_ETCD_URL=http://127.0.0.1:2379" ;;
    prometheus) echo "QM_TEST_PROMETHEUS_URL=http://127.0.0.1:9090" ;;
    kafka)
      echo "QM_TEST_KAFKA_BOOTSTRAP=$(sed -n 's/^bootstrap=//p' "$SVC/kafka.log")"
      echo "QM_TEST_KAFKA_CONTROL=$(sed -n 's/^control=//p' "$SVC/kafka.log")"
      ;;
    tansu) echo "QM_TEST_TANSU_BOOTSTRAP=127.0.0.1:$TANSU_PORT" ;;
    apache-kafka)
      echo "QM_TEST_APACHE_KAFKA_BOOTSTRAP=127.0.0.1:$AK_PORT"
      echo "QM_TEST_APACHE_KAFKA_SASL_BOOTSTRAP=127.0.0.1:$((AK_PORT + 1))"
      echo "QM_TEST_APACHE_KAFKA_SASL_USER=$AK_USER"
      echo "QM_TEST_APACHE_KAFKA_SASL_PASSWORD=$AK_PASSWORD"
      echo "QM_TEST_APACHE_KAFKA_CA=$AK/tls/ca.pem"
      echo "QM_TEST_APACHE_KAFKA_MTLS_BOOTSTRAP=127.0.0.1:$((AK_PORT + 2))"
      echo "QM_TEST_APACHE_KAFKA_CLIENT_CERT=$AK/tls/client.pem"
      echo "QM_TEST_APACHE_KAFKA_CLIENT_KEY=$AK/tls/client.key"
      echo "QM_TEST_APACHE_KAFKA_LIB=$AK/lib"
      ;;
  esac
}

start_postgres() {
  rm -rf "$SVC/pg"; mkdir -p "$SVC/pg"; chown postgres:postgres "$SVC/pg"
  runuser -u postgres -- "$PG/initdb" -D "$SVC/pg/data" -A trust -U postgres >"$SVC/pg/initdb.log" 2>&1 \
    || { tail -n 20 "$SVC/pg/initdb.log" >&2; return 1; }
  local ssl="-c ssl=off"
  if [ -r /etc/ssl/certs/ssl-cert-snakeoil.pem ] && runuser -u postgres -- test -r /etc/ssl/private/ssl-cert-snakeoil.key; then
    ssl="-c ssl=on -c ssl_cert_file=/etc/ssl/certs/ssl-cert-snakeoil.pem -c ssl_key_file=/etc/ssl/private/ssl-cert-snakeoil.key"
  fi
  # pg_ctl detaches the server itself; -w waits until it accepts connections.
  runuser -u postgres -- "$PG/pg_ctl" -D "$SVC/pg/data" -l "$SVC/pg/pg.log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p 5432 -k $SVC/pg -c fsync=off -c max_connections=200 $ssl" >/dev/null \
    || { tail -n 20 "$SVC/pg/pg.log" >&2; return 1; }
  head -n 1 "$SVC/pg/data/postmaster.pid" >"$SVC/postgres.pid"
}

start_redis() {
  [ -n "${KEEP_DATA:-}" ] || rm -rf "$SVC/redis"
  mkdir -p "$SVC/redis"
  bg redis redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly yes \
    --appendfsync always --dir "$SVC/redis"
}

start_nats() {
  [ -n "${KEEP_DATA:-}" ] || rm -rf "$SVC/nats"
  cat >"$SVC/nats.conf" <<EOF
listen: 127.0.0.1:4222
http: 127.0.0.1:8222
jetstream { store_dir: "$SVC/nats", max_memory_store: 256MB, max_file_store: 1GB }
EOF
  bg nats nats-server -c "$SVC/nats.conf"
}

start_rabbitmq() {
  rm -rf "$SVC/rabbitmq"; mkdir -p "$SVC/rabbitmq"; chown rabbitmq:rabbitmq "$SVC/rabbitmq"
  cat >/etc/rabbitmq/rabbitmq-env.conf <<EOF
NODENAME=rabbit@localhost
NODE_IP_ADDRESS=127.0.0.1
MNESIA_BASE=$SVC/rabbitmq/mnesia
LOG_BASE=$SVC/rabbitmq/log
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
export ERL_EPMD_ADDRESS=127.0.0.1
EOF
  cat >/etc/rabbitmq/rabbitmq.conf <<'EOF'
listeners.tcp.default = 127.0.0.1:5672
management.tcp.ip = 127.0.0.1
management.tcp.port = 15672
prometheus.tcp.ip = 127.0.0.1
prometheus.tcp.port = 15692
prometheus.return_per_object_metrics = true
EOF
  rabbitmq-plugins enable --offline rabbitmq_management rabbitmq_prometheus \
    rabbitmq_shovel rabbitmq_shovel_management >/dev/null
  # Our own epmd, on loopback, unless one is already answering there.
  alive "$(pid_of epmd)" || bg epmd epmd -address 127.0.0.1
  bg rabbitmq /usr/sbin/rabbitmq-server
}

start_etcd() {
  rm -rf "$SVC/etcd"
  bg etcd etcd --name qm --data-dir "$SVC/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster qm=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
}

start_prometheus() {
  rm -rf "$SVC/prom"
  cat >"$SVC/prometheus.yml" <<'EOF'
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - {job_name: prometheus, static_configs: [{targets: ['127.0.0.1:9090']}]}
  - {job_name: rabbitmq, static_configs: [{targets: ['127.0.0.1:15692']}]}
EOF
  bg prometheus prometheus --config.file="$SVC/prometheus.yml" --storage.tsdb.path="$SVC/prom" \
    --web.listen-address=127.0.0.1:9090 --web.enable-lifecycle
}

start_kafka() {
  local bin=${QM_KAFKA_MOCK:-}
  if [ -z "$bin" ]; then
    local root; root=$(cd "$(dirname "$0")/.." && pwd)
    (cd "$root" && cargo build --quiet --all-features --bin qm-kafka-mock)
    bin="${CARGO_TARGET_DIR:-$root/target}/debug/qm-kafka-mock"
  fi
  bg kafka "$bin" --brokers 3
}

# Tansu keeps everything in memory: each start is an empty cluster.
start_tansu() {
  local url="tcp://127.0.0.1:$TANSU_PORT"
  bg tansu tansu broker --listener-url "$url" --advertised-listener-url "$url" \
    --storage-engine memory://tansu/
}

# cargo_install_tansu: the broker from crates.io, when no `tansu` is on PATH
cargo_install_tansu() {
  if command -v tansu >/dev/null; then
    log "tansu installed already: $(command -v tansu)"
    return 0
  fi
  log "tansu: cargo install --locked tansu@$TANSU_VERSION --features dynostore (about 8 minutes on 2 cores)"
  SECONDS=0
  cargo install --quiet --locked "tansu@$TANSU_VERSION" --features dynostore
  log "tansu installed (${SECONDS}s)"
}

# ---- apache-kafka: the real broker from Maven Central ------------------------------------------

# install_apache_kafka: the broker's runtime classpath into $AK/lib (kept across starts)
install_apache_kafka() {
  local root; root=$(cd "$(dirname "$0")/.." && pwd)
  if [ -f "$AK/lib/.complete" ]; then
    log "apache-kafka installed already: $AK/lib"
    return 0
  fi
  SECONDS=0
  rm -rf "$AK/lib"; mkdir -p "$AK"
  mvn -q -B -f "$root/scripts/apache-kafka/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$AK/lib" >"$AK/install.log" 2>&1 \
    || { tail -n 30 "$AK/install.log" >&2; return 1; }
  touch "$AK/lib/.complete"
  log "apache-kafka installed ($(find "$AK/lib" -name '*.jar' | wc -l) jars, ${SECONDS}s)"
}

ak_java() { java -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$AK/lib/*" "$@"; }

# ak_tls: a CA, the broker's certificate (127.0.0.1, localhost) and a client's, in PEM; the
# broker's keystore and truststore in PKCS12
ak_tls() {
  local d=$AK/tls pass=qm-store-pass
  rm -rf "$d"; mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=qm-test-kafka-ca" \
      -keyout ca.key -out ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout broker.key -out broker.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
      -extfile broker.ext -out broker.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$AK_USER" -keyout client.key -out client.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
      -extfile client.ext -out client.pem 2>/dev/null
    openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
      -passout "pass:$pass" -out broker.p12
    keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 \
      -storetype PKCS12 -storepass "$pass" >/dev/null 2>&1
    chmod 644 ./*.pem ./*.key
  )
}

# ak_properties: the broker's server.properties on stdout
ak_properties() {
  local p=$AK_PORT pass=qm-store-pass plain scram
  plain="org.apache.kafka.common.security.plain.PlainLoginModule required"
  plain+=" username=\"$AK_USER\" password=\"$AK_PASSWORD\" user_$AK_USER=\"$AK_PASSWORD\";"
  scram="org.apache.kafka.common.security.scram.ScramLoginModule required;"
  cat <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((p + 3))
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$p,SASL_SSL://127.0.0.1:$((p + 1)),SSL://127.0.0.1:$((p + 2)),CONTROLLER://127.0.0.1:$((p + 3))
advertised.listeners=PLAINTEXT://127.0.0.1:$p,SASL_SSL://127.0.0.1:$((p + 1)),SSL://127.0.0.1:$((p + 2))
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$AK/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
ssl.keystore.type=PKCS12
ssl.keystore.location=$AK/tls/broker.p12
ssl.keystore.password=$pass
ssl.key.password=$pass
ssl.truststore.type=PKCS12
ssl.truststore.location=$AK/tls/truststore.p12
ssl.truststore.password=$pass
listener.name.ssl.ssl.client.auth=required
listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl.plain.sasl.jaas.config=$plain
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$scram
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$scram
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
PROPS
}

start_apache_kafka() {
  [ -f "$AK/lib/.complete" ] || { log "apache-kafka is not installed: run $0 install apache-kafka"; return 1; }
  rm -rf "$AK/data"; mkdir -p "$AK/data"
  ak_tls
  ak_properties >"$AK/server.properties"
  local id; id=$(ak_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  ak_java kafka.tools.StorageTool format --config "$AK/server.properties" --cluster-id "$id" \
    --add-scram "SCRAM-SHA-256=[name=$AK_USER,password=$AK_PASSWORD]" \
    --add-scram "SCRAM-SHA-512=[name=$AK_USER,password=$AK_PASSWORD]" \
    >"$AK/format.log" 2>&1 || { tail -n 20 "$AK/format.log" >&2; return 1; }
  bg apache-kafka java -Xmx512m -Xms128m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$AK/lib/*" kafka.Kafka "$AK/server.properties"
}

# ak_metadata: a metadata request on PLAINTEXT answers (lists the topics)
ak_metadata() {
  ak_java org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$AK_PORT" --list
}

ready() {
  case $1 in
    apache-kafka) wait_for apache-kafka 120 ak_metadata ;;
    postgres) wait_for postgres 30 "$PG/pg_isready" -q -h 127.0.0.1 -p 5432 ;;
    redis) wait_for redis 30 sh -c 'redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG' ;;
    nats) wait_for nats 30 curl -fsS 'http://127.0.0.1:8222/healthz?js-enabled-only=true' ;;
    kafka) wait_for kafka 30 grep -q '^control=' "$SVC/kafka.log" ;;
    tansu) wait_for tansu 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$TANSU_PORT" ;;
    etcd) wait_for etcd 30 sh -c 'curl -fsS http://127.0.0.1:2379/health | grep -q "\"health\":\"true\""' ;;
    rabbitmq)
      wait_for rabbitmq 120 sh -c 'curl -fsS -u guest:guest http://127.0.0.1:15672/api/overview && curl -fsS http://127.0.0.1:15692/metrics'
      # the Erlang VM (beam.smp) itself, for stop
      cp "$SVC/rabbitmq/mnesia/rabbit@localhost.pid" "$SVC/beam.pid"
      ;;
    prometheus)
      wait_for prometheus 60 curl -fsS http://127.0.0.1:9090/-/ready
      if running rabbitmq; then  # first scrape of RabbitMQ done
        wait_for prometheus-rabbitmq 60 sh -c 'curl -fsS "http://127.0.0.1:9090/api/v1/query?query=up%7Bjob%3D%22rabbitmq%22%7D%3D%3D1" | grep -q "\"value\""'
      fi
      ;;
  esac
}

stop_one() {
  case $1 in
    postgres)
      if [ -f "$SVC/pg/data/postmaster.pid" ]; then
        runuser -u postgres -- "$PG/pg_ctl" -D "$SVC/pg/data" -m fast -w stop >/dev/null 2>&1 || true
      fi
      stop_pids "$(pid_of postgres)"
      ;;
    rabbitmq)
      stop_pids "$(pid_of beam)" "$(pid_of rabbitmq)"
      stop_pids "$(pid_of epmd)"
      rm -f "$SVC/beam.pid" "$SVC/epmd.pid"
      ;;
    *) stop_pids "$(pid_of "$1")" ;;
  esac
  rm -f "$SVC/$1.pid"
}

# ---- commands --------------------------------------------------------------------------------

cmd_install() {
  local pkgs=() missing=() s p
  for s in "$@"; do
    # shellcheck disable=SC2207
    pkgs+=($(packages "$s"))
  done
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if (( ${#missing[@]} == 0 )); then
    log "packages installed already: $*"
  else
    apt_install "${missing[@]}"
  fi
  if [[ " $* " == *" tansu "* ]]; then cargo_install_tansu; fi
  if [[ " $* " == *" apache-kafka "* ]]; then install_apache_kafka; fi
}

# apt_install PACKAGE...: from Debian, without starting what they install
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  # Keep the packages' postinst scripts from starting the services (no systemd here anyway).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  SECONDS=0
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  log "installed $* (${SECONDS}s)"
}

cmd_start() {
  mkdir -p "$SVC"; chmod 755 "$SVC"
  local s started=()
  for s in "$@"; do
    if running "$s"; then
      log "$s is running already"
      continue
    fi
    if ! command -v "$(binary "$s")" >/dev/null; then
      log "$s is not installed: run $0 install $s"
      return 1
    fi
    "start_${s//-/_}"
    started+=("$s")
  done
  for s in "${started[@]}"; do ready "$s"; done
  write_env
  for s in "$@"; do urls "$s"; done
}

# "$SVC/env": the URLs of every running service, for `. "$QM_SERVICES_DIR/env"`
write_env() {
  local s
  : >"$SVC/env"
  for s in "${ALL[@]}"; do
    if running "$s"; then urls "$s" | sed 's/^/export /' >>"$SVC/env"; fi
  done
}

cmd_restart() {
  local s
  for s in "$@"; do
    case $s in
      nats|redis) ;;
      *) log "restart keeps data for nats and redis only, not $s"; return 2 ;;
    esac
    stop_one "$s"
  done
  KEEP_DATA=1 cmd_start "$@"
}

cmd_stop() {
  [ -d "$SVC" ] || return 0
  local s
  # prometheus first (it scrapes the others), rabbitmq's epmd last
  for s in prometheus kafka tansu apache-kafka etcd redis nats postgres rabbitmq; do
    [[ " $* " == *" $s "* ]] || continue
    stop_one "$s"
  done
  write_env
  log "stopped: $*"
}

# ---- main ------------------------------------------------------------------------------------

(( $# >= 1 )) || usage
command=$1; shift
(( $# )) || set -- "${ALL[@]}"
for s in "$@"; do
  [[ " ${ALL[*]} " == *" $s "* ]] || { log "unknown service $s"; usage; }
done
case $command in
  install) cmd_install "$@" ;;
  start) cmd_start "$@" ;;
  restart) cmd_restart "$@" ;;
  stop) cmd_stop "$@" ;;
  *) usage ;;
esac
