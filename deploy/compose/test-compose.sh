#!/usr/bin/env bash
# The compose cluster's host test (TCP): brings the cluster up with
# deploy/cluster.sh, uses it from the client container, crashes a node, and
# tears it down.  Run by deploy/test.sh; its JUnit XML is counted there.
#
# Usage: deploy/compose/test-compose.sh [--xml FILE]
#
# Test cases (classname compose):
#   up                 deploy/cluster.sh up --tcp --prometheus succeeds: every
#                      shard has a primary and its replicas in sync
#   health             etcd and the three kvservers report healthy (gRPC Stats
#                      and RESP PING health checks)
#   redis_cli_slots    redis-cli -c SETs 60 keys across the slots and GETs
#                      them back; a plain redis-cli is answered MOVED for keys
#                      of other nodes' shards
#   kvctl_put_get      kvctl put/get, and each tool reads what the other wrote
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

ALL=(up health redis_cli_slots kvctl_put_get status metrics prometheus bench crash_restart down)
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
            [ "$(redis-cli -c -h kvserver1 -p 6380 set "key:$i" "value-$i")" = OK ] || { echo "SET key:$i failed"; exit 1; }
        done
        for i in $(seq 1 60); do
            v=$(redis-cli -c -h kvserver$(( i % 3 + 1 )) -p 6380 get "key:$i")
            [ "$v" = "value-$i" ] || { echo "GET key:$i: got [$v]"; exit 1; }
            case $(redis-cli -h kvserver1 -p 6380 get "key:$i") in MOVED*) moved=$((moved + 1)) ;; esac
        done
        echo "60 keys set and read back; $moved answered MOVED by kvserver1"
        [ "$moved" -gt 0 ] && [ "$moved" -lt 60 ]'
}
check redis_cli_slots "redis-cli -c SET/GET" redis_slots

kvctl_put_get() {
    client sh -c '
        S=--server=kvserver2:7300
        for i in $(seq 1 20); do kvctl $S put "kv:$i" "kvctl-$i" >/dev/null || exit 1; done
        for i in $(seq 1 20); do [ "$(kvctl $S get "kv:$i")" = "kvctl-$i" ] || { echo "kvctl get kv:$i"; exit 1; }; done
        [ "$(kvctl $S get key:7)" = value-7 ] || { echo "kvctl does not read redis-cli key:7"; exit 1; }
        export REDISCLI_AUTH=$(cat /run/secrets/kv_token)
        [ "$(redis-cli -c -h kvserver3 -p 6380 get kv:5)" = kvctl-5 ] || { echo "redis-cli does not read kvctl kv:5"; exit 1; }
        echo ok'
}
check kvctl_put_get "kvctl put/get" kvctl_put_get

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
            v=$(redis-cli -c -h kvserver1 -p 6380 get "key:$i")
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
