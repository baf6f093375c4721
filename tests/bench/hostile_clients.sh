#!/usr/bin/env bash
# Hostile RESP clients against one kvserver: does an ordinary client still
# get its SETs and GETs answered, and does the server's memory stay bounded?
# Prints figures (a measurement, not a test: nothing is gated).
#
#   tests/bench/hostile_clients.sh [--kvserver BIN] [--seconds N] [--pool SIZE] [-- FLAGS...]
#
# Starts kvserver (this checkout's build unless --kvserver) on 127.0.0.1
# with --pool_size (default 256M), then opens at once:
#   - 1000 idle connections (one PING each, then nothing);
#   - 200 connections that send half a request and stop;
#   - 20 connections that declare a 64 MiB SET value and send one byte;
#   - 20 connections that pipeline MGETs of a 4 MiB key (32 copies each)
#     and never read.
# While they are held (--seconds, default 15) an ordinary client does
# SET+GET of a 64 KiB value in a loop, pausing 2 ms between pairs (about
# 20 MB/s of overwrites: flat out, overwrites alone outrun the 500 ms grace
# period of a small pool and the figures would measure that); every second the server's VmRSS
# (/proc/<pid>/status) and CPU time are sampled. Extra FLAGS go to kvserver.
# Output: one line per second, then a summary with the ordinary client's
# success count and worst latency, peak RSS and the kvstore_resp_* limit
# counters from /metrics.
set -euo pipefail
cd "$(dirname "$0")/../.."

KVSERVER_BIN=""
SECONDS_HELD=15
POOL=256M
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kvserver) KVSERVER_BIN="$2"; shift ;;
    --seconds) SECONDS_HELD="$2"; shift ;;
    --pool) POOL="$2"; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
command -v python3 >/dev/null || { echo "missing python3" >&2; exit 1; }
if [[ -z "$KVSERVER_BIN" ]]; then
  bazel build //server:kvserver >/dev/null 2>&1
  KVSERVER_BIN="$(bazel info bazel-bin 2>/dev/null)/server/kvserver"
fi
# 1240 client sockets in the driver below.
ulimit -n 4096

WORK=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$KVSERVER_BIN" --control_port=0 --resp_port=0 --metrics_port=0 --pool_size="$POOL" \
  --transport=tcp --ready_file="$WORK/kv.ready" "${EXTRA[@]}" 2>"$WORK/kvserver.log" &
PID=$!
for _ in $(seq 100); do [[ -s "$WORK/kv.ready" ]] && break; sleep 0.1; done
RESP=$(sed -n 's/^resp_port=//p' "$WORK/kv.ready")
METRICS=$(sed -n 's/^metrics_port=//p' "$WORK/kv.ready")
echo "kvserver pid $PID, resp port $RESP, pool $POOL, flags: ${EXTRA[*]:-(defaults)}"

python3 - "$PID" "$RESP" "$METRICS" "$SECONDS_HELD" <<'PY'
import os, socket, sys, time, urllib.request

pid, port, metrics_port, held = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tck = os.sysconf("SC_CLK_TCK")

def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1

def cpu_s():
    f = open(f"/proc/{pid}/stat").read()
    rest = f[f.rfind(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / tck

def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out

def conn(timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

def read_reply(s):
    # Enough of RESP2 for +, -, : and $ replies.
    buf = b""
    while b"\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    line, rest = buf.split(b"\r\n", 1)
    if line[:1] != b"$" or line == b"$-1":
        return line
    n = int(line[1:])
    while len(rest) < n + 2:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed")
        rest += chunk
    return rest[:n]

base_rss = rss_kib()
setup = conn()
setup.sendall(cmd("SET", "big", b"b" * (4 << 20)))
assert read_reply(setup) == b"+OK", "setting the 4 MiB key failed"
setup.close()

hostile, refused = [], 0
def hold(make):
    global refused
    try:
        hostile.append(make())
    except OSError:
        refused += 1

def idle():
    s = conn(); s.sendall(cmd("PING")); return s
for _ in range(1000):
    hold(idle)
def partial():
    s = conn(); s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nonly part"); return s
for _ in range(200):
    hold(partial)
def huge():
    s = conn(); s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nh\r\n$67108864\r\nx"); return s
for _ in range(20):
    hold(huge)
def mget_never_read():
    s = conn()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    try:
        s.send(cmd("MGET", *(["big"] * 32)) * 8)
    except BlockingIOError:
        pass
    return s
for _ in range(20):
    hold(mget_never_read)
print(f"hostile connections opened: {len(hostile)} (refused at connect: {refused})")

ok = fail = 0
worst = 0.0
errors = {}
value = os.urandom(32 << 10).hex().encode()  # 64 KiB
start = time.time()
next_sample = start
peak_rss = base_rss
cpu0 = cpu_s()
c = None
i = 0
while time.time() - start < held:
    try:
        if c is None:
            c = conn()
        t0 = time.time()
        c.sendall(cmd("SET", f"ord{i % 100}", value))
        r1 = read_reply(c)
        c.sendall(cmd("GET", f"ord{i % 100}"))
        r2 = read_reply(c)
        dt = time.time() - t0
        if r1 == b"+OK" and r2 == value:
            ok += 1
            worst = max(worst, dt)
        else:
            fail += 1
            key = (r1 if r1 != b"+OK" else r2)[:200]
            errors[key] = errors.get(key, 0) + 1
    except OSError as e:
        fail += 1
        key = str(e)[:200]
        errors[key] = errors.get(key, 0) + 1
        c = None
    i += 1
    time.sleep(0.002)
    if time.time() >= next_sample:
        rss = rss_kib()
        peak_rss = max(peak_rss, rss)
        print(f"t={time.time() - start:5.1f}s rss={rss / 1024:7.1f} MiB cpu={cpu_s() - cpu0:5.2f}s "
              f"ordinary ok={ok} failed={fail}")
        next_sample += 1
cpu = cpu_s() - cpu0
print(f"\nsummary over {held} s:")
print(f"  ordinary SET+GET pairs (64 KiB): {ok} ok, {fail} failed, worst {worst * 1000:.1f} ms")
for k, v in errors.items():
    print(f"    {v} x {k}")
print(f"  server RSS: {base_rss / 1024:.1f} MiB before, peak {peak_rss / 1024:.1f} MiB, "
      f"now {rss_kib() / 1024:.1f} MiB; server CPU {cpu:.2f} s")
try:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("kvstore_resp_") and "_bytes_total" not in line:
            print("  " + line)
except OSError as e:
    print(f"  (no /metrics: {e})")
PY
echo "server log: $(wc -c <"$WORK/kvserver.log") bytes"
