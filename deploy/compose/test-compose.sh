#!/usr/bin/env bash
# The compose cluster's host test (TCP): brings the cluster up with
# deploy/cluster.sh (TLS everywhere, the default), uses it from the client
# container, checks what TLS and the etcd network refuse, renews the
# certificates, crashes a node, and tears it down.  Run by deploy/test.sh; its
# JUnit XML is counted there.
#
# Usage: deploy/compose/test-compose.sh [--xml FILE]
#
# Test cases (classname compose):
#   up                 deploy/cluster.sh up --tcp --prometheus succeeds: every
#                      shard has a primary and its replicas in sync
#   health             etcd and the three kvservers report healthy (gRPC Stats
#                      and RESP PING health checks, both over TLS)
#   redis_cli_slots    redis-cli -c --tls SETs 60 keys across the slots and
#                      GETs them back; redis-cli without -c is answered MOVED
#                      for keys of other nodes' shards
#   redis_tls          redis-cli --tls with the client certificate SET/GET
#                      (token in REDISCLI_AUTH); refused: plaintext on 6380
#                      (closed) and on the TLS port 6390, and TLS without a
#                      client certificate
#   kvctl_put_get      kvctl put/get, and each tool reads what the other wrote
#   kvctl_tls          kvctl --tls_ca/--tls_cert put/get and cluster status; an
#                      admin command (cluster rebalance --dry_run) with the
#                      admin token, refused with the data token only; kvctl
#                      without TLS, or without a client certificate, refused
#   etcd_tls           from a one-off container on the etcd network: etcdctl
#                      without a client certificate fails; with one but no
#                      user, reading /kvstore/ is permission denied; as user kv
#                      it reads the /kvstore/ keys and may not write /other
#   etcd_isolated      the client container can neither resolve etcd nor
#                      connect to etcd's address; kvserver1 can
#   cert_renew         deploy/cluster.sh certs --renew: kvserver1's RESP TLS
#                      and control ports serve the new certificate without a
#                      restart (KV_TLS_RELOAD_INTERVAL=2s), and kvctl still works
#   status             cluster status --json: 3 shards up, R=2, none syncing;
#                      cluster nodes lists n1, n2, n3
#   metrics            each node's /metrics on its host port counts keys
#   prometheus         promtool check config; Prometheus scrapes 3 targets up
#   bench              deploy/cluster.sh bench: operations done, 0 errors
#   crash_restart      kill -9 of a kvserver process: docker restarts the
#                      container (restart policy), the cluster is back in sync,
#                      and every key written before is still read back
#   down               deploy/cluster.sh down: no container, network or volume
#                      of the project is left
# When no Docker engine can run here (no dockerd, or it cannot start), every
# case is reported skipped with the reason; that is the only skip.
#
# Isolation: its own compose project (kvstore-test), host ports 19401-19403
# and 19090, and a temporary state directory (token, dockerd log); a dockerd
# it had to start is stopped at the end.  Exit status: 0 every case passed or
# all were skipped, 1 otherwise.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$REPO/deploy/cluster.sh
XML=""
case ${1:-} in
--xml) XML=${2:?--xml needs a file} ;;
"") ;;
-h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" && exit 0 ;;
*) echo "test-compose: unknown argument $1" >&2 && exit 2 ;;
esac

export KV_COMPOSE_PROJECT=kvstore-test
export KV_METRICS_PORT_1=19401 KV_METRICS_PORT_2=19402 KV_METRICS_PORT_3=19403 KV_PROMETHEUS_PORT=19090
export DOCKER_API_VERSION=${DOCKER_API_VERSION:-1.41}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvcompose.XXXXXX")
export KV_COMPOSE_STATE=$WORK/state
export KV_TOKEN_FILE=$KV_COMPOSE_STATE/token # the compose file's secrets, as cluster.sh sets them
export KV_ADMIN_TOKEN_FILE=$KV_COMPOSE_STATE/admin_token
export KV_CLUSTER_SECRET_FILE=$KV_COMPOSE_STATE/cluster_secret
export KV_ETCD_ROOT_PASSWORD_FILE=$KV_COMPOSE_STATE/etcd_root_password
export KV_ETCD_PASSWORD_FILE=$KV_COMPOSE_STATE/etcd_password
export KV_CERTS_DIR=$KV_COMPOSE_STATE/certs
export KV_TLS=on KV_TLS_RELOAD_INTERVAL=2s # cert_renew waits for the reload
LOG=$WORK/log
NAMES=() RESULTS=() MESSAGES=() TIMES=()
T_CASE=$SECONDS

# record NAME pass|fail|skip MESSAGE
record() {
    NAMES+=("$1") RESULTS+=("$2") MESSAGES+=("$3") TIMES+=("$((SECONDS - T_CASE))")
    printf '    %-4s %-16s %s\n' "$2" "$1" "$3"
    T_CASE=$SECONDS
}
# check NAME MESSAGE-IF-FAILED COMMAND...: pass when COMMAND succeeds.
check() {
    local name=$1 why=$2
    shift 2
    if "$@" >"$LOG" 2>&1; then
        record "$name" pass "$(tail -n 1 "$LOG")"
    else
        echo "--- $name output:" && tail -n 20 "$LOG"
        record "$name" fail "$why: $(tail -n 1 "$LOG")"
    fi
}
cluster() { "$CLUSTER" "$@"; }
client() { docker-compose -p "$KV_COMPOSE_PROJECT" -f "$REPO/deploy/compose/docker-compose.yml" exec -T client "$@"; }
# In the client container's shells: kvctl's and redis-cli's TLS flags (its
# certificate directory is /run/tls).
KT="--tls_ca=/run/tls/ca.pem --tls_cert=/run/tls/cert.pem --tls_key=/run/tls/key.pem"
RT="--tls --cacert /run/tls/ca.pem --cert /run/tls/cert.pem --key /run/tls/key.pem"

write_xml() {
    [[ -n $XML ]] || return 0
    local i failed=0 skipped=0
    esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
    for i in "${!NAMES[@]}"; do
        [[ ${RESULTS[$i]} == fail ]] && failed=$((failed + 1))
        [[ ${RESULTS[$i]} == skip ]] && skipped=$((skipped + 1))
    done
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites><testsuite name=\"compose\" tests=\"${#NAMES[@]}\" failures=\"$failed\" skipped=\"$skipped\">"
        for i in "${!NAMES[@]}"; do
            echo "<testcase classname=\"compose\" name=\"${NAMES[$i]}\" time=\"${TIMES[$i]}\">"
            case ${RESULTS[$i]} in
            fail) echo "<failure message=\"$(esc <<<"${MESSAGES[$i]}")\"/>" ;;
            skip) echo "<skipped message=\"$(esc <<<"${MESSAGES[$i]}")\"/>" ;;
            esac
            echo "</testcase>"
        done
        echo "</testsuite></testsuites>"
    } >"$XML"
}
finish() {
    write_xml
    rm -rf "$WORK"
    local r
    for r in "${RESULTS[@]}"; do [[ $r == fail ]] && exit 1; done
    exit 0
}

ALL=(up health redis_cli_slots redis_tls kvctl_put_get kvctl_tls etcd_tls etcd_isolated status metrics prometheus
    bench cert_renew crash_restart down)
if ! cluster engine >"$LOG" 2>&1; then
    cat "$LOG"
    why="no Docker engine can run here: $(tail -n 1 "$LOG")"
    for n in "${ALL[@]}"; do record "$n" skip "$why"; done
    finish
fi
cat "$LOG"

# --- up --------------------------------------------------------------------------
T0=$SECONDS
if cluster up --tcp --prometheus --timeout=180 >"$LOG" 2>&1; then
    record up pass "$(grep 'ready after' "$LOG")"
else
    tail -n 40 "$LOG"
    record up fail "deploy/cluster.sh up failed: $(tail -n 1 "$LOG")"
    for n in "${ALL[@]:1:${#ALL[@]}-2}"; do record "$n" fail "not run: the cluster did not come up"; done
    check down "deploy/cluster.sh down failed" cluster down --stop-dockerd
    finish
fi
echo "    (up took $((SECONDS - T0)) s)"

healthy() {
    local s st
    for s in etcd kvserver1 kvserver2 kvserver3; do
        for _ in $(seq 1 30); do
            st=$(docker inspect -f '{{.State.Health.Status}}' "${KV_COMPOSE_PROJECT}_${s}_1")
            [[ $st == healthy ]] && break
            sleep 1
        done
        echo "$s $st"
        [[ $st == healthy ]] || return 1
    done
}
check health "a service is not healthy" healthy

redis_slots() {
    # one shell in the client container: SET, GET back, and plain GETs on
    # kvserver1 that must be redirected for other shards' keys
    client sh -c '
        export REDISCLI_AUTH=$(cat /run/secrets/kv_token)
        moved=0
        for i in $(seq 1 60); do
            [ "$(redis-cli -c -h kvserver1 -p 6390 '"$RT"' set "key:$i" "value-$i")" = OK ] || { echo "SET key:$i failed"; exit 1; }
        done
        for i in $(seq 1 60); do
            v=$(redis-cli -c -h kvserver$(( i % 3 + 1 )) -p 6390 '"$RT"' get "key:$i")
            [ "$v" = "value-$i" ] || { echo "GET key:$i: got [$v]"; exit 1; }
            case $(redis-cli -h kvserver1 -p 6390 '"$RT"' get "key:$i") in MOVED*) moved=$((moved + 1)) ;; esac
        done
        echo "60 keys set and read back; $moved answered MOVED by kvserver1"
        [ "$moved" -gt 0 ] && [ "$moved" -lt 60 ]'
}
check redis_cli_slots "redis-cli -c SET/GET" redis_slots

# The token travels in REDISCLI_AUTH, never in argv.  A refusal must be the
# transport's: a server that answered (+PONG, -NOAUTH, -ERR) fails the case.
redis_tls() {
    client sh -c '
        export REDISCLI_AUTH=$(cat /run/secrets/kv_token)
        [ "$(redis-cli -c -h kvserver2 -p 6390 '"$RT"' set tls:key tls-value)" = OK ] || { echo "TLS SET failed"; exit 1; }
        [ "$(redis-cli -c -h kvserver3 -p 6390 '"$RT"' get tls:key)" = tls-value ] || { echo "TLS GET failed"; exit 1; }
        [ "$(redis-cli -h kvserver1 -p 6390 '"$RT"' ping)" = PONG ] || { echo "TLS PING failed"; exit 1; }
        refused() { # what, then the redis-cli arguments
            what=$1; shift
            out=$(redis-cli -h kvserver1 "$@" ping 2>&1) && { echo "$what: accepted: $out"; exit 1; }
            case $out in *PONG*|*NOAUTH*|*ERR*) echo "$what: the server answered: $out"; exit 1 ;; esac
            echo "$what: refused ($(echo $out | tr -s "
" " "))"
        }
        refused "plaintext on 6380" -p 6380
        refused "plaintext on the TLS port 6390" -p 6390
        refused "TLS without a client certificate" -p 6390 --tls --cacert /run/tls/ca.pem
        echo "TLS SET/GET/PING work; plaintext and certificate-less connections refused"'
}
check redis_tls "redis-cli over TLS" redis_tls

kvctl_put_get() {
    client sh -c '
        S="--server=kvserver2:7300 '"$KT"'"
        for i in $(seq 1 20); do kvctl $S put "kv:$i" "kvctl-$i" >/dev/null || exit 1; done
        for i in $(seq 1 20); do [ "$(kvctl $S get "kv:$i")" = "kvctl-$i" ] || { echo "kvctl get kv:$i"; exit 1; }; done
        [ "$(kvctl $S get key:7)" = value-7 ] || { echo "kvctl does not read redis-cli key:7"; exit 1; }
        export REDISCLI_AUTH=$(cat /run/secrets/kv_token)
        [ "$(redis-cli -c -h kvserver3 -p 6390 '"$RT"' get kv:5)" = kvctl-5 ] || { echo "redis-cli does not read kvctl kv:5"; exit 1; }
        echo ok'
}
check kvctl_put_get "kvctl put/get" kvctl_put_get

kvctl_tls() {
    client sh -c '
        S="--server=kvserver3:7300 --timeout=10s"
        kvctl $S '"$KT"' put tls:kvctl yes >/dev/null || { echo "kvctl put over TLS failed"; exit 1; }
        [ "$(kvctl $S '"$KT"' get tls:kvctl)" = yes ] || { echo "kvctl get over TLS failed"; exit 1; }
        kvctl $S '"$KT"' cluster status | grep -q "^shard 2 *up" || { echo "kvctl cluster status over TLS failed"; exit 1; }
        kvctl $S '"$KT"' cluster rebalance --dry_run || { echo "admin command with the admin token failed"; exit 1; }
        out=$(env -u KVSTORE_ADMIN_TOKEN_FILE kvctl $S '"$KT"' cluster rebalance --dry_run 2>&1) &&
            { echo "admin command without the admin token accepted: $out"; exit 1; }
        case $out in *PERMISSION_DENIED*) ;; *) echo "without the admin token: $out"; exit 1 ;; esac
        for how in "" "--tls_ca=/run/tls/ca.pem"; do
            out=$(kvctl $S $how get tls:kvctl 2>&1) && { echo "kvctl ${how:-without TLS} accepted: $out"; exit 1; }
            case $out in *UNAVAILABLE*) ;; *) echo "kvctl ${how:-without TLS}: $out"; exit 1 ;; esac
        done
        echo "kvctl over mutual TLS works (admin command with the admin token only); without TLS or a client certificate refused"'
}
check kvctl_tls "kvctl over TLS" kvctl_tls

# etcd_run SCRIPT: SCRIPT in a one-off container of the etcd image on the
# etcd network, with the client certificate and the password of the etcd
# user kv; E is etcdctl with the CA and etcd's address.
etcd_run() {
    docker run --rm --network "${KV_COMPOSE_PROJECT}_etcd" \
        -v "$KV_CERTS_DIR/client:/run/tls:ro" -v "$KV_ETCD_PASSWORD_FILE:/run/etcd_password:ro" \
        -e E="etcdctl --endpoints=https://etcd:2379 --cacert=/run/tls/ca.pem --dial-timeout=5s --command-timeout=5s" \
        -e C="--cert=/run/tls/cert.pem --key=/run/tls/key.pem" \
        --entrypoint /bin/sh kvstore-etcd:latest -c "$1"
}
etcd_tls() {
    etcd_run '
        out=$($E get /kvstore/ --prefix --keys-only 2>&1) && { echo "no client certificate: accepted: $out"; exit 1; }
        echo "no client certificate: refused ($(echo "$out" | tail -n 1))"
        out=$($E $C get /kvstore/ --prefix --keys-only 2>&1) && { echo "certificate, no user: accepted: $out"; exit 1; }
        case $out in *"permission denied"*) ;; *) echo "certificate, no user: $out"; exit 1 ;; esac
        echo "certificate, no user: permission denied"
        export ETCDCTL_USER=kv:$(cat /run/etcd_password)
        n=$($E $C get /kvstore/ --prefix --keys-only | grep -c ^/kvstore/)
        [ "$n" -gt 0 ] || { echo "user kv reads no /kvstore/ key"; exit 1; }
        out=$($E $C put /other x 2>&1) && { echo "user kv wrote /other"; exit 1; }
        case $out in *"permission denied"*) ;; *) echo "user kv, /other: $out"; exit 1 ;; esac
        echo "user kv: reads $n /kvstore/ keys, may not write /other"'
}
check etcd_tls "etcd TLS and auth" etcd_tls

etcd_isolated() {
    local ip
    ip=$(docker inspect -f "{{(index .NetworkSettings.Networks \"${KV_COMPOSE_PROJECT}_etcd\").IPAddress}}" \
        "${KV_COMPOSE_PROJECT}_etcd_1") || return 1
    echo "etcd at $ip"
    [[ -n $ip ]] || return 1
    docker exec "${KV_COMPOSE_PROJECT}_kvserver1_1" nc -w 5 "$ip" 2379 </dev/null ||
        { echo "kvserver1 cannot reach etcd at $ip: the check below would prove nothing"; return 1; }
    client sh -c '
        nslookup etcd >/dev/null 2>&1 && { echo "the client container resolves etcd"; exit 1; }
        nc -w 5 '"$ip"' 2379 </dev/null && { echo "the client container reaches etcd at '"$ip"'"; exit 1; }
        echo "the client container neither resolves etcd nor reaches '"$ip"':2379; kvserver1 does"'
}
check etcd_isolated "the client container reaches etcd" etcd_isolated

# ready_json: 3 shards up with R in sync and none syncing (stdin: status JSON)
ready_json() {
    python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["replication_factor"] == 2, m
assert len(m["shards"]) == 3, m
for s in m["shards"]:
    assert s["up"] and len(s["backups"]) == 1 and not s["syncing"], s
print("3 shards, R=2, in sync")'
}
map_epoch() { python3 -c 'import json,sys; print(json.load(sys.stdin)["epoch"])' 2>/dev/null || echo 0; }
status_ok() {
    cluster status --json | ready_json || return 1
    local nodes
    nodes=$(cluster kvctl --json cluster nodes | python3 -c 'import json,sys; print(" ".join(sorted(n["node_id"] for n in json.load(sys.stdin)["nodes"])))')
    echo "nodes: $nodes"
    [[ $nodes == "n1 n2 n3" ]]
}
check status "cluster status" status_ok

metrics_ok() {
    local p n
    for p in 19401 19402 19403; do
        n=$(curl -sf "http://127.0.0.1:$p/metrics" | awk '$1 == "kvstore_keys" {print $2}')
        echo "127.0.0.1:$p kvstore_keys=$n"
        [[ -n $n ]] && ((n > 0)) || return 1
    done
}
check metrics "/metrics on the host ports" metrics_ok

prometheus_ok() {
    promtool check config "$REPO/deploy/compose/prometheus.yml" || return 1
    local up=0
    for _ in $(seq 1 40); do
        up=$(curl -sf "http://127.0.0.1:19090/api/v1/targets" |
            python3 -c 'import json,sys; print(sum(t["health"] == "up" for t in json.load(sys.stdin)["data"]["activeTargets"]))' 2>/dev/null || echo 0)
        ((up == 3)) && break
        sleep 1
    done
    echo "prometheus: $up of 3 targets up"
    ((up == 3))
}
check prometheus "Prometheus" prometheus_ok

bench_ok() {
    cluster bench --duration=2s --concurrency=4 --value-size=256 --keys=300 --seed=7 >"$WORK/bench" 2>&1
    local rc=$?
    grep -E '^(transport|ops|errors)' "$WORK/bench"
    ((rc == 0)) && grep -qE '^errors +0$' "$WORK/bench" && grep -qE '^ops +[1-9]' "$WORK/bench"
}
check bench "kvctl bench" bench_ok

# serial HOST PORT: the serial of the certificate HOST:PORT serves (from the
# host, on the compose network; the client certificate, as the port asks).
serial() {
    openssl s_client -connect "$1:$2" -alpn h2 -CAfile "$KV_COMPOSE_STATE/tls/ca.pem" \
        -cert "$KV_COMPOSE_STATE/tls/client.pem" -key "$KV_COMPOSE_STATE/tls/client.key" </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null
}
cert_renew() {
    local ip old new resp ctl
    ip=$(docker inspect -f "{{(index .NetworkSettings.Networks \"${KV_COMPOSE_PROJECT}_default\").IPAddress}}" \
        "${KV_COMPOSE_PROJECT}_kvserver1_1") || return 1
    old=$(openssl x509 -noout -serial -in "$KV_CERTS_DIR/kvserver1/cert.pem")
    [[ $(serial "$ip" 6390) == "$old" && $(serial "$ip" 7300) == "$old" ]] ||
        { echo "kvserver1 ($ip) does not serve its certificate $old"; return 1; }
    cluster certs --renew || return 1
    new=$(openssl x509 -noout -serial -in "$KV_CERTS_DIR/kvserver1/cert.pem")
    [[ $new != "$old" ]] || { echo "certs --renew left $old"; return 1; }
    for _ in $(seq 1 60); do # RESP at the next accept; the control port within 2 s
        resp=$(serial "$ip" 6390) ctl=$(serial "$ip" 7300)
        [[ $resp == "$new" && $ctl == "$new" ]] && break
        sleep 1
    done
    echo "RESP TLS port: $resp, control port: $ctl (old $old, new $new)"
    [[ $resp == "$new" && $ctl == "$new" ]] || return 1
    [[ $(docker inspect -f '{{.RestartCount}}' "${KV_COMPOSE_PROJECT}_kvserver1_1") == 0 ]] ||
        { echo "kvserver1 was restarted"; return 1; }
    client sh -c 'kvctl --server=kvserver1:7300 '"$KT"' put renew:key ok >/dev/null &&
        [ "$(kvctl --server=kvserver2:7300 '"$KT"' get renew:key)" = ok ]' || { echo "kvctl after the renewal failed"; return 1; }
    echo "kvserver1 serves the renewed certificate on both ports without a restart; kvctl works"
}
check cert_renew "certificate renewal" cert_renew

crash_restart() {
    local c=${KV_COMPOSE_PROJECT}_kvserver2_1 pid t0=$SECONDS restarts epoch0
    # The map before the crash still reads "in sync" until the controller
    # has seen the crash, so "back in sync" means a later map that is.
    epoch0=$(cluster status --json | map_epoch) || return 1
    pid=$(docker inspect -f '{{.State.Pid}}' "$c") || return 1
    echo "kill -9 kvserver2 (host pid $pid)"
    kill -9 "$pid" || return 1
    for _ in $(seq 1 60); do
        restarts=$(docker inspect -f '{{.RestartCount}}' "$c")
        ((restarts > 0)) && break
        sleep 0.5
    done
    echo "restart count $restarts after $((SECONDS - t0)) s"
    ((restarts > 0)) || return 1
    local status
    for _ in $(seq 1 90); do
        status=$(cluster status --json 2>/dev/null)
        (($(map_epoch <<<"$status") > epoch0)) && ready_json <<<"$status" >/dev/null 2>&1 && break
        sleep 1
    done
    status=$(cluster status --json) || return 1
    echo "map epoch $epoch0 before the crash, $(map_epoch <<<"$status") now"
    (($(map_epoch <<<"$status") > epoch0)) || return 1
    ready_json <<<"$status" || return 1
    local synced=$((SECONDS - t0))
    echo "back in sync after $synced s"
    client sh -c '
        export REDISCLI_AUTH=$(cat /run/secrets/kv_token)
        for i in $(seq 1 60); do
            v=$(redis-cli -c -h kvserver1 -p 6390 '"$RT"' get "key:$i")
            [ "$v" = "value-$i" ] || { echo "after the crash, key:$i is [$v]"; exit 1; }
        done
        echo "60 keys read back after the crash"' || return 1
    echo "in sync on a later map $synced s after the kill; 60 keys read back"
}
check crash_restart "crash and restart" crash_restart

down_clean() {
    cluster down --stop-dockerd || return 1
    local label="label=com.docker.compose.project=$KV_COMPOSE_PROJECT"
    if docker info >/dev/null 2>&1; then
        [[ -z $(docker ps -aq --filter "$label")$(docker network ls -q --filter "$label")$(docker volume ls -q --filter "$label") ]]
    fi
}
check down "deploy/cluster.sh down left something" down_clean
finish
