#!/usr/bin/env bash
# kvstore's compose cluster: etcd, three kvservers (R=2) and a client
# container, from images built on this machine (deploy/compose/).
#
# Usage: deploy/cluster.sh COMMAND [options]
#
#   up [--prometheus] [--tcp | --rdma] [--no-build] [--timeout=SECONDS]
#         Builds what is missing (kvserver and kvctl with bazel; the images,
#         only those whose inputs changed), starts dockerd if none answers,
#         starts the cluster and waits until every shard has a primary and
#         all its replicas in sync (kvctl cluster status in the client
#         container; default timeout 180 s).  Prints how to reach it, the
#         transport and why, and the time it took.  --prometheus also starts
#         Prometheus (compose profile "metrics") on 127.0.0.1:9090.
#         Transport: RDMA when this host has /dev/infiniband with a device and
#         deploy/compose/docker-compose.rdma.yml exists (that overlay maps the
#         device into the containers); TCP otherwise.  --tcp forces TCP,
#         --rdma fails unless RDMA is possible.  --no-build skips bazel.
#   up --vm [ARGS]  the same inside the Soft-RoCE VM (tests/rxe), where the
#         containers use RDMA on rxe0: runs deploy/compose/vm.sh up ARGS
#   vm ARGS              deploy/compose/vm.sh ARGS (see its --help)
#   down [--stop-dockerd]
#         Removes the cluster's containers, network and volumes, checks that
#         none is left and says so.  --stop-dockerd also stops the dockerd
#         that `up` started (never one it did not start).
#   status [--json]      the cluster map (kvctl cluster status) and containers
#   logs [-f] [SERVICE...]   container logs (etcd, kvserver1..3, client,
#                        prometheus)
#   bench [KVCTL BENCH FLAGS]
#         kvctl bench from the client container against the cluster
#         (default --duration=5s --concurrency=16 --value-size=1K --keys=2000)
#         and prints its figures; flags given replace those defaults.
#   chaos [ARGS]
#         Kills, pauses and restarts kvserver containers under a recorded
#         load and checks the history (no acknowledged write lost, no stale
#         read; per-key linearizability when //tests/jepsen:check_history is
#         built): deploy/compose/chaos.sh ARGS (--rounds=kill,pause,restart
#         --transport=auto|rdma|tcp --seed=N --history=FILE; see its --help).
#         Needs chaos_load in the client image (bazel build
#         //tests/cluster:chaos_load before up).  Without chaos.sh, a simple
#         built-in round: kill -9 the primary of shard 0 while kvctl bench
#         runs, wait for the failover, start it again, wait until in sync.
#   kvctl ARGS...        kvctl in the client container, --server set
#   redis-cli ARGS...    redis-cli -c in the client container, host, port and
#                        password set
#   certs [--renew]      make what is missing (or, --renew, new leaf keys and
#                        certificates from the same CA) with deploy/make-certs.sh
#                        and copy them into each container's directory; running
#                        kvservers take renewed files within
#                        --tls_reload_interval (KV_TLS_RELOAD_INTERVAL, 1m)
#   engine               start dockerd if none answers (as up does), and say so
#   -h, --help           this text
#
# TLS is on unless KV_TLS=off (given to up; remembered for later commands):
# control and RESP ports (RESP on 6390) with mutual TLS, peers, and etcd with
# client certificates and etcd users (docs/security.md §2.2, §2.4).  KV_TLS=off
# adds deploy/compose/docker-compose.plaintext.yml: no TLS, no etcd auth, RESP
# on 6380; for measuring what TLS costs, and in the emulated VM (vm.sh sets it).
#
# Environment: KV_TLS (on|off, default on), KV_COMPOSE_PROJECT (compose project name, default kvstore),
# KV_COMPOSE_STATE (token, dockerd pid and log, overlay in use; default
# deploy/compose/.state), KV_TOKEN_FILE (data clients' token, default
# STATE/token), KV_ADMIN_TOKEN_FILE (admin token, default STATE/admin_token),
# KV_CLUSTER_SECRET_FILE (the kvservers' peer secret, default
# STATE/cluster_secret), KV_TLS_DIR (make-certs.sh's directory: the CA, its key and
# every leaf; default STATE/tls), KV_ETCD_ROOT_PASSWORD_FILE and KV_ETCD_PASSWORD_FILE
# (etcd's root and kv users, default STATE/etcd_root_password and
# STATE/etcd_password), KV_CERTS_DIR (the containers' certificates, default
# STATE/certs; make-certs.sh writes the CA and every leaf to STATE/tls),
# KV_REPLICAS, KV_POOL_SIZE, KV_TRANSPORT, KV_METRICS_PORT_1..3,
# KV_PROMETHEUS_PORT, KV_MEMBER_TTL, KV_FENCE_MARGIN, KV_ETCD_HEARTBEAT_MS,
# KV_ETCD_ELECTION_MS, KV_HEALTH_INTERVAL, KV_HEALTH_TIMEOUT, KV_HEALTH_START, KV_STATUS_TIMEOUT
# (kvctl cluster status timeout while up waits, default 3s), KV_OP_TIMEOUT
# (kvctl --timeout of bench and kvctl, chaos_load --op_timeout) (see
# deploy/compose/docker-compose.yml), KV_IMAGES_FROM (up: load the images
# from this directory of build-images.sh --save tars instead of assembling
# them; deploy/compose/vm.sh uses it), BAZEL (default
# bazel), DOCKER_API_VERSION (default 1.41, for a newer docker client talking
# to Debian's dockerd 20.10).
#
# Exit status: 0 done; 1 failed (the message says what: no docker, no bazel
# output, a port taken, the cluster not ready in time...); 2 bad usage.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COMPOSE_DIR=$REPO/deploy/compose
STATE=${KV_COMPOSE_STATE:-$COMPOSE_DIR/.state} # token, dockerd pid and log, overlay in use
PROJECT=${KV_COMPOSE_PROJECT:-kvstore}
BAZEL=${BAZEL:-bazel}
SEED=kvserver1:7300 # any node will do: kvctl fetches the map from it
export DOCKER_API_VERSION=${DOCKER_API_VERSION:-1.41}
export KV_TOKEN_FILE=${KV_TOKEN_FILE:-$STATE/token}
export KV_ADMIN_TOKEN_FILE=${KV_ADMIN_TOKEN_FILE:-$STATE/admin_token}
export KV_CLUSTER_SECRET_FILE=${KV_CLUSTER_SECRET_FILE:-$STATE/cluster_secret}
export KV_ETCD_ROOT_PASSWORD_FILE=${KV_ETCD_ROOT_PASSWORD_FILE:-$STATE/etcd_root_password}
export KV_ETCD_PASSWORD_FILE=${KV_ETCD_PASSWORD_FILE:-$STATE/etcd_password}
export KV_CERTS_DIR=${KV_CERTS_DIR:-$STATE/certs}
# make-certs.sh's output, CA key included: never mounted.  deploy/compose/vm.sh
# points it at certificates made on the host (openssl under an emulated CPU
# took 100 s).
TLS_DIR=${KV_TLS_DIR:-$STATE/tls}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
say() { echo "cluster: $*"; }
die() {
    echo "cluster: $*" >&2
    exit 1
}
bad_usage() {
    echo "cluster: $* (see deploy/cluster.sh --help)" >&2
    exit 2
}

# --- compose -------------------------------------------------------------------
COMPOSE_FILES=(-f "$COMPOSE_DIR/docker-compose.yml")
RDMA_OVERLAY=$COMPOSE_DIR/docker-compose.rdma.yml
# The overlay in use is remembered so that later commands (down, status)
# address the same set of files.
[[ -f $STATE/overlay ]] && [[ -f $RDMA_OVERLAY ]] && COMPOSE_FILES+=(-f "$RDMA_OVERLAY")
PLAIN_OVERLAY=$COMPOSE_DIR/docker-compose.plaintext.yml
[[ -f $STATE/plaintext ]] && COMPOSE_FILES+=(-f "$PLAIN_OVERLAY")
# kvctl's TLS flags in the client container (its certificate directory);
# none for the plaintext overlay.  RESP_PORT is what redis-cli dials.
tls_mode() {
    if [[ -f $STATE/plaintext ]]; then
        KVCTL_TLS=() REDIS_TLS="" RESP_PORT=6380
    else
        KVCTL_TLS=(--tls_ca=/run/tls/ca.pem --tls_cert=/run/tls/cert.pem --tls_key=/run/tls/key.pem)
        REDIS_TLS="--tls --cacert /run/tls/ca.pem --cert /run/tls/cert.pem --key /run/tls/key.pem"
        RESP_PORT=6390
    fi
}
tls_mode

compose() { docker-compose -p "$PROJECT" --project-directory "$COMPOSE_DIR" "${COMPOSE_FILES[@]}" "$@"; }
# A command in the client container (no tty, so it works from scripts and
# CI).  docker exec on the container's id: much quicker than docker-compose
# exec, which matters when polling the map.  The id comes from docker ps by
# compose's labels, not from `docker-compose ps`: that is Python, and took
# over two minutes in the emulated VM.
CLIENT_ID=""
client_id() {
    docker ps -q --filter "label=com.docker.compose.project=$PROJECT" \
        --filter label=com.docker.compose.service=client 2>/dev/null | head -n 1
}
in_client() {
    [[ -n $CLIENT_ID ]] || CLIENT_ID=$(client_id)
    [[ -n $CLIENT_ID ]] || die "no client container (is the cluster up? deploy/cluster.sh up)"
    docker exec -i "$CLIENT_ID" "$@"
}

need_docker() {
    command -v docker-compose >/dev/null ||
        die "docker-compose not found (deploy/setup.sh installs docker.io and docker-compose)"
    command -v docker >/dev/null || die "docker not found (deploy/setup.sh installs docker.io)"
}

# Starts dockerd when none answers.  With systemd: systemctl start docker.
# Without (containers, CI sandboxes): dockerd in the background, with
# --iptables=false because such places have no netfilter to program; the
# compose network needs none (containers reach each other on the bridge, and
# published ports go through docker-proxy).
ensure_dockerd() {
    need_docker
    docker info >/dev/null 2>&1 && return 0
    if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
        say "dockerd is not running: systemctl start docker"
        systemctl start docker || die "systemctl start docker failed"
    else
        command -v dockerd >/dev/null || die "dockerd not found (deploy/setup.sh installs docker.io)"
        [[ $(id -u) -eq 0 ]] || die "dockerd is not running, and starting it needs root"
        mkdir -p "$STATE"
        say "dockerd is not running: starting dockerd --iptables=false (log: ${STATE#"$REPO"/}/dockerd.log)"
        nohup dockerd --iptables=false >"$STATE/dockerd.log" 2>&1 &
        echo $! >"$STATE/dockerd.pid"
    fi
    local i pid
    pid=$(cat "$STATE/dockerd.pid" 2>/dev/null || true)
    for ((i = 0; i < 60; i++)); do
        docker info >/dev/null 2>&1 && return 0
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
            tail -n 5 "$STATE/dockerd.log" >&2 || true
            rm -f "$STATE/dockerd.pid"
            die "dockerd exited at once (its log above)"
        fi
        sleep 0.5
    done
    tail -n 10 "$STATE/dockerd.log" 2>/dev/null >&2 || true
    if [[ -n $pid ]]; then # ours: do not leave it behind
        kill "$pid" 2>/dev/null || true
        rm -f "$STATE/dockerd.pid"
    fi
    die "dockerd did not answer within 30 s"
}

# --- transport -----------------------------------------------------------------
# Sets TRANSPORT (rdma|tcp) and WHY.
choose_transport() {
    local want=$1 devs=""
    [[ -d /sys/class/infiniband ]] && devs=$(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')
    if [[ $want == tcp ]]; then
        TRANSPORT=tcp WHY="--tcp given"
    elif [[ ! -e /dev/infiniband/uverbs0 || -z $devs ]]; then
        TRANSPORT=tcp WHY="this host has no RDMA device (no /dev/infiniband/uverbs0; a kernel with rdma_rxe can make one: rdma link add rxe0 type rxe netdev IFACE)"
    elif [[ ! -f $RDMA_OVERLAY ]]; then
        TRANSPORT=tcp WHY="RDMA device(s) ${devs% } present, but no ${RDMA_OVERLAY#"$REPO"/} to map them into the containers"
    else
        TRANSPORT=rdma WHY="RDMA device(s) ${devs% } mapped into the containers by ${RDMA_OVERLAY#"$REPO"/}"
    fi
    [[ $want == rdma && $TRANSPORT != rdma ]] && die "--rdma: not possible: $WHY"
    return 0
}

# --- up --------------------------------------------------------------------------
build_binaries() {
    local nobuild=$1
    local bins=("$REPO/bazel-bin/server/kvserver" "$REPO/bazel-bin/client/kvctl/kvctl")
    if ((!nobuild)) && command -v "$BAZEL" >/dev/null; then
        say "bazel build //server:kvserver //client/kvctl:kvctl //tests/cluster:chaos_load //tests/jepsen:check_history"
        (cd "$REPO" && "$BAZEL" build //server:kvserver //client/kvctl:kvctl //tests/cluster:chaos_load \
            //tests/jepsen:check_history 2>&1 | tail -n 3) ||
            die "bazel build failed"
    fi
    local b
    for b in "${bins[@]}"; do
        [[ -x $b ]] || die "no ${b#"$REPO"/}: run bazel build //server:kvserver //client/kvctl:kvctl (or deploy/setup.sh for bazel)"
    done
}

# Host ports the cluster publishes must be free (ours, from a running
# cluster, are fine: up is idempotent).
check_ports() {
    local prom=$1 p ports=("${KV_METRICS_PORT_1:-9401}" "${KV_METRICS_PORT_2:-9402}" "${KV_METRICS_PORT_3:-9403}")
    ((prom)) && ports+=("${KV_PROMETHEUS_PORT:-9090}")
    local ours
    ours=$(docker ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Ports}}' 2>/dev/null || true)
    command -v ss >/dev/null || return 0
    for p in "${ports[@]}"; do
        [[ $ours == *":$p->"* ]] && continue
        if ss -ltnH "sport = :$p" 2>/dev/null | grep -q .; then
            die "port 127.0.0.1:$p is taken by another process (set KV_METRICS_PORT_1..3 / KV_PROMETHEUS_PORT to other ports)"
        fi
    done
}

# One secret per principal (docs/security.md §2): the data clients' token,
# the admin token (kvctl cluster failover/add-node/...), and the secret the
# kvservers present to each other, which no client container gets.
make_token() {
    mkdir -p "$STATE"
    local file what
    for file in "$KV_TOKEN_FILE" "$KV_ADMIN_TOKEN_FILE" "$KV_CLUSTER_SECRET_FILE" \
        "$KV_ETCD_ROOT_PASSWORD_FILE" "$KV_ETCD_PASSWORD_FILE"; do
        [[ -s $file ]] && continue
        (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$file")
        case $file in
        "$KV_TOKEN_FILE") what="data token: AUTH for redis-cli, bearer token for kvctl" ;;
        "$KV_ADMIN_TOKEN_FILE") what="admin token: kvctl --admin_token_file, redis-cli --user admin" ;;
        "$KV_ETCD_ROOT_PASSWORD_FILE") what="etcd root password: etcd-init only" ;;
        "$KV_ETCD_PASSWORD_FILE") what="etcd password: of the etcd user kv, for the kvservers" ;;
        *) what="cluster secret: the kvservers' own, given to no client" ;;
        esac
        say "new ${what%%:*} in ${file#"$REPO"/} (${what#*: })"
    done
}

# The certificates: make-certs.sh writes the CA and every leaf into
# STATE/tls; each container gets a directory of its own under KV_CERTS_DIR
# with ca.pem, cert.pem and key.pem (its own pair only: no container sees
# the CA key or another's key).  A changed file is written beside the old one
# and renamed over it, key first, as make-certs.sh --renew does, so that a
# kvserver reloading (--tls_reload_interval) reads either pair whole.
CERT_OWNERS=(kvserver1 kvserver2 kvserver3 kvserver4 etcd client)
make_certs() {
    local renew=() name f src
    (($#)) && renew=(--renew)
    local missing=0
    for name in ca "${CERT_OWNERS[@]}"; do
        [[ -s $TLS_DIR/$name.pem && -s $TLS_DIR/$name.key ]] || missing=1
    done
    if ((missing || ${#renew[@]})); then
        command -v openssl >/dev/null || die "openssl not found (apt-get install openssl): the cluster's certificates need it"
        mkdir -p "$STATE"
        "$REPO/deploy/make-certs.sh" --dir="$TLS_DIR" --nodes="kvserver1 kvserver2 kvserver3 kvserver4" "${renew[@]}" |
            sed "s|$REPO/||; s/^/cluster: /" || die "deploy/make-certs.sh failed"
    fi
    (umask 077 && mkdir -p "$KV_CERTS_DIR")
    for name in "${CERT_OWNERS[@]}"; do
        mkdir -p "$KV_CERTS_DIR/$name"
        for f in key.pem cert.pem ca.pem; do
            case $f in
            key.pem) src=$TLS_DIR/$name.key ;;
            cert.pem) src=$TLS_DIR/$name.pem ;;
            *) src=$TLS_DIR/ca.pem ;;
            esac
            cmp -s "$src" "$KV_CERTS_DIR/$name/$f" && continue
            install -m 0644 "$src" "$KV_CERTS_DIR/$name/.$f.new" &&
                mv -f "$KV_CERTS_DIR/$name/.$f.new" "$KV_CERTS_DIR/$name/$f" ||
                die "copying $src to $KV_CERTS_DIR/$name failed"
        done
    done
}

# cluster_ready JSON: every shard up with R replicas in sync, none syncing.
cluster_ready() {
    python3 -c '
import json, sys
m = json.loads(sys.stdin.read())
r = m["replication_factor"]
ok = m["shards"] and all(s["up"] and len(s["backups"]) + 1 == r and not s["syncing"]
                         for s in m["shards"])
sys.exit(0 if ok else 1)' 2>/dev/null
}

# map_summary: one line per kvctl --json cluster status on stdin.
map_summary() {
    python3 -c '
import json, sys
m = json.loads(sys.stdin.read())
print("%d shard(s): " % len(m["shards"]) + ", ".join(
    "%s primary=%s backups=%s%s%s" % (s["shard_id"], s["primary"] or "-", ",".join(s["backups"]) or "-",
                                      "" if s["up"] else " DOWN", " syncing" if s["syncing"] else "")
    for s in m["shards"]))'
}

# Every 15 s it says where it is (the map's shards, or kvctl's error), so
# that a slow start (the emulated VM) can be told from a stuck one.
wait_ready() {
    local timeout=$1 t0=$SECONDS out="" err=$STATE/status.err last=$SECONDS
    local rpc=${KV_STATUS_TIMEOUT:-3s}
    say "waiting until every shard has a primary and its replicas are in sync (up to ${timeout}s)"
    while ((SECONDS - t0 < timeout)); do
        out=$(in_client kvctl --server=$SEED "${KVCTL_TLS[@]}" --timeout="$rpc" --json cluster status 2>"$err" || true)
        if [[ -n $out ]] && cluster_ready <<<"$out"; then
            return 0
        fi
        if ((SECONDS - last >= 15)); then
            last=$SECONDS
            say "not ready after $((SECONDS - t0)) s: $(map_summary <<<"$out" 2>/dev/null || tail -n 1 "$err")"
        fi
        sleep 1
    done
    echo "--- last status:" >&2
    in_client kvctl --server=$SEED "${KVCTL_TLS[@]}" --timeout="$rpc" cluster status >&2 || true
    compose ps >&2 || true
    compose logs --no-color --tail=15 >&2 || true
    die "the cluster was not ready within ${timeout}s (logs above)"
}

# phase NAME: how long the step that just ended took.
phase() {
    say "$1 ($((SECONDS - T_PHASE)) s)"
    T_PHASE=$SECONDS
}

cmd_up() {
    local prom=0 want=auto nobuild=0 timeout=180 t0=$SECONDS
    T_PHASE=$SECONDS
    while (($#)); do
        case $1 in
        --prometheus) prom=1 ;;
        --tcp) want=tcp ;;
        --rdma) want=rdma ;;
        --no-build) nobuild=1 ;;
        --timeout=*) timeout=${1#*=} ;;
        *) bad_usage "up: unknown option $1" ;;
        esac
        shift
    done
    [[ $timeout =~ ^[1-9][0-9]*$ ]] || bad_usage "up: --timeout needs a number of seconds"
    TLS=${KV_TLS:-on}
    [[ $TLS == on || $TLS == off ]] || bad_usage "KV_TLS must be on or off, not '$TLS'"
    command -v python3 >/dev/null || die "python3 not found (reads kvctl's JSON)"
    need_docker
    choose_transport "$want"
    check_ports "$prom"
    build_binaries "$nobuild"
    phase "binaries"
    ensure_dockerd
    local images=(kvstore-server kvstore-client kvstore-etcd)
    ((prom)) && images+=(kvstore-prometheus)
    if [[ -n ${KV_IMAGES_FROM:-} ]]; then # tars made by build-images.sh --save (the VM)
        "$COMPOSE_DIR/build-images.sh" --load "$KV_IMAGES_FROM" "${images[@]}" ||
            die "loading the images from $KV_IMAGES_FROM failed"
    else
        "$COMPOSE_DIR/build-images.sh" "${images[@]}" || die "building the images failed"
    fi
    phase "images"
    make_token
    make_certs
    phase "secrets and certificates"
    COMPOSE_FILES=(-f "$COMPOSE_DIR/docker-compose.yml")
    rm -f "$STATE/overlay" "$STATE/plaintext"
    if [[ $TRANSPORT == rdma ]]; then
        COMPOSE_FILES+=(-f "$RDMA_OVERLAY")
        echo "$RDMA_OVERLAY" >"$STATE/overlay"
    else
        export KV_TRANSPORT=${KV_TRANSPORT:-tcp}
    fi
    if [[ $TLS == off ]]; then
        COMPOSE_FILES+=(-f "$PLAIN_OVERLAY")
        echo "$PLAIN_OVERLAY" >"$STATE/plaintext"
    fi
    tls_mode
    local profile=()
    ((prom)) && profile=(--profile metrics)
    say "starting the cluster (project $PROJECT, transport $TRANSPORT, TLS $TLS)"
    compose "${profile[@]}" up -d --remove-orphans || die "docker-compose up failed"
    phase "containers started"
    CLIENT_ID=$(client_id)
    wait_ready "$timeout"
    phase "shards in sync"
    in_client kvctl --server=$SEED "${KVCTL_TLS[@]}" cluster status
    print_reach "$prom"
    say "over $(echo "$TRANSPORT" | tr a-z A-Z): $WHY"
    say "ready after $((SECONDS - t0)) s"
}

print_reach() {
    cat <<EOF

The cluster is up (compose project $PROJECT; node addresses are container names,
so clients run in the client container):
  deploy/cluster.sh kvctl put user:1 alice      # = docker-compose exec client kvctl --server=$SEED ${KVCTL_TLS[*]} ...
  deploy/cluster.sh kvctl get user:1
  deploy/cluster.sh redis-cli set foo bar       # = redis-cli -c -h kvserver1 -p $RESP_PORT ${REDIS_TLS:+$REDIS_TLS }(password from the token)
  deploy/cluster.sh status | logs [SERVICE] | bench | down
Metrics (Prometheus text) from this host:
  http://127.0.0.1:${KV_METRICS_PORT_1:-9401}/metrics  http://127.0.0.1:${KV_METRICS_PORT_2:-9402}/metrics  http://127.0.0.1:${KV_METRICS_PORT_3:-9403}/metrics
EOF
    (($1)) && echo "Prometheus: http://127.0.0.1:${KV_PROMETHEUS_PORT:-9090}/ (job kvstore)"
    echo
}

# --- down ------------------------------------------------------------------------
cmd_down() {
    local stopd=0
    case ${1:-} in
    "") ;;
    --stop-dockerd) stopd=1 ;;
    *) bad_usage "down: unknown option $1" ;;
    esac
    need_docker
    if docker info >/dev/null 2>&1; then
        compose --profile metrics down -v --remove-orphans --timeout 10 ||
            die "docker-compose down failed"
        rm -f "$STATE/overlay" "$STATE/plaintext"
        local label="label=com.docker.compose.project=$PROJECT" c n v
        c=$(docker ps -aq --filter "$label" | wc -l)
        n=$(docker network ls -q --filter "$label" | wc -l)
        v=$(docker volume ls -q --filter "$label" | wc -l)
        if ((c + n + v)); then
            die "left behind: $c container(s), $n network(s), $v volume(s) of project $PROJECT"
        fi
        say "down: no containers, networks or volumes of project $PROJECT left"
    else
        say "down: dockerd is not running, so no container is either"
    fi
    if ((stopd)) && [[ -f $STATE/dockerd.pid ]]; then
        local pid
        pid=$(cat "$STATE/dockerd.pid")
        if kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]]; then
            say "stopping the dockerd that up started (pid $pid)"
            kill "$pid"
            local i
            for ((i = 0; i < 40; i++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.5
            done
        fi
        rm -f "$STATE/dockerd.pid"
    fi
}

# --- the rest --------------------------------------------------------------------
running() {
    need_docker
    docker info >/dev/null 2>&1 || die "dockerd is not running (deploy/cluster.sh up starts it)"
    CLIENT_ID=$(client_id)
    [[ -n $CLIENT_ID ]] || die "the cluster is not running (deploy/cluster.sh up)"
}

cmd_status() {
    running
    local json=()
    case ${1:-} in
    "") ;;
    --json) json=(--json) ;;
    *) bad_usage "status: unknown option $1" ;;
    esac
    in_client kvctl --server=$SEED "${KVCTL_TLS[@]}" "${json[@]}" cluster status
    ((${#json[@]})) || compose ps
}

cmd_bench() {
    running
    local args=("$@")
    ((${#args[@]})) || args=(--duration=5s --concurrency=16 --value-size=1K --keys=2000)
    say "kvctl bench ${args[*]} (client container -> cluster)"
    in_client kvctl --server=$SEED "${KVCTL_TLS[@]}" ${KV_OP_TIMEOUT:+--timeout="$KV_OP_TIMEOUT"} bench "${args[@]}"
}

cmd_chaos() {
    running
    if [[ -x $COMPOSE_DIR/chaos.sh ]]; then
        exec "$COMPOSE_DIR/chaos.sh" "$@"
    fi
    ((!$#)) || bad_usage "chaos: the built-in round takes no arguments"
    builtin_chaos
}

# shard_primary N: node id of shard N's primary (n1..n3 = kvserver1..3).
shard_primary() {
    in_client kvctl --server="$2" "${KVCTL_TLS[@]}" --timeout=2s --json cluster status |
        python3 -c 'import json,sys; m=json.load(sys.stdin); print([s for s in m["shards"] if s["shard_id"]=='"$1"'][0]["primary"] or "")'
}

# One round without a history check (deploy/compose/chaos.sh has that):
# under a bench load, kill -9 shard 0's primary, wait for a new one, start
# the old container again, wait until in sync.
builtin_chaos() {
    local victim primary t0
    victim=$(shard_primary 0 $SEED)
    [[ $victim =~ ^n[0-9]+$ ]] || die "chaos: no primary for shard 0"
    local svc=kvserver${victim#n} other=kvserver1:7300
    [[ $svc == kvserver1 ]] && other=kvserver2:7300
    say "chaos: load for 20 s; kill -9 $svc (primary of shard 0) after 3 s"
    in_client kvctl --server=$other "${KVCTL_TLS[@]}" --timeout=30s bench --duration=20s --concurrency=8 \
        --value-size=256 --get-ratio=0.5 >"$STATE/chaos-bench.txt" 2>&1 &
    local bench=$!
    sleep 3
    t0=$SECONDS
    compose kill -s SIGKILL "$svc" >/dev/null 2>&1
    for ((;;)); do
        primary=$(shard_primary 0 $other 2>/dev/null || true)
        [[ -n $primary && $primary != "$victim" ]] && break
        ((SECONDS - t0 < 30)) || die "chaos: no new primary for shard 0 after 30 s"
        sleep 0.5
    done
    say "chaos: shard 0 primary $victim -> $primary seen after ~$((SECONDS - t0)) s (polling; the servers' logs have the exact time)"
    compose start "$svc" >/dev/null
    wait "$bench" || say "chaos: the bench load reported an error (${STATE#"$REPO"/}/chaos-bench.txt)"
    tail -n 12 "$STATE/chaos-bench.txt"
    wait_ready 120
    say "chaos: $svc is back and in sync"
}

# The compose cluster inside the project's Soft-RoCE VM (RDMA on rxe0):
# deploy/compose/vm.sh, the VM test's side of this tool.
run_vm() {
    [[ -x $COMPOSE_DIR/vm.sh ]] || die "deploy/compose/vm.sh is not in this tree (the Soft-RoCE VM side)"
    exec "$COMPOSE_DIR/vm.sh" "$@"
}

main() {
    (($#)) || {
        usage
        exit 2
    }
    local cmd=$1
    shift
    case $cmd in
    up)
        [[ ${1:-} == --vm ]] && run_vm up "${@:2}"
        cmd_up "$@"
        ;;
    vm) run_vm "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    logs)
        running
        compose --profile metrics logs --no-color "$@"
        ;;
    bench) cmd_bench "$@" ;;
    chaos) cmd_chaos "$@" ;;
    kvctl)
        running
        in_client kvctl --server=$SEED "${KVCTL_TLS[@]}" ${KV_OP_TIMEOUT:+--timeout="$KV_OP_TIMEOUT"} "$@"
        ;;
    redis-cli)
        running
        # REDIS_TLS is a fixed list of words without spaces in them
        in_client sh -c 'REDISCLI_AUTH=$(cat /run/secrets/kv_token) exec redis-cli -c -h kvserver1 -p '"$RESP_PORT $REDIS_TLS"' "$@"' redis-cli "$@"
        ;;
    certs)
        case ${1:-} in
        "") make_certs ;;
        --renew) make_certs renew ;;
        *) bad_usage "certs: unknown option $1" ;;
        esac
        say "certificates in ${KV_CERTS_DIR#"$REPO"/} (CA and every key: ${TLS_DIR#"$REPO"/})"
        ;;
    engine)
        ensure_dockerd
        say "dockerd answers ($(docker version -f '{{.Server.Version}}' 2>/dev/null || echo '?'))"
        ;;
    -h | --help | help) usage ;;
    *) bad_usage "unknown command $cmd" ;;
    esac
}
main "$@"
