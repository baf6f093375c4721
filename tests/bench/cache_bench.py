#!/usr/bin/python3
"""Cache figures for kvserver against Debian's redis-server, in one run.

  tests/bench/cache_bench.py [--requests N] [--keys N] [--value-bytes N]
                             [--memory BYTES] [--seed S] [--json FILE]
                             [--kvserver BIN] [--skip-expiry] [--expiry-keys N]
                             [--expiry-spread S]
                             [--overwrite-minutes M] [--overwrite-memory BYTES]

Hit ratio: both servers get the same memory (kvserver: --pool_size plus its
index; redis-server: maxmemory of the same bytes) and replay the same trace
as a cache-aside client does: GET the key; on a miss SET it. Two traces:
  zipf    Zipf(0.99) over --keys keys;
  scan    the same Zipf stream with a one-time sequential scan of fresh keys
          mixed in (a third of requests), the pattern that flushes LRU.
Policies: kvserver allkeys-lru and allkeys-lfu against redis-server's
allkeys-lru and allkeys-lfu; the best of each is reported too.
Memory per key: bytes each server uses per cached key at the end (kvserver:
live pool bytes plus its index slots; Redis: used_memory / keys).

Expiry: --expiry-keys keys (default 1,000,000) with TTLs spread over
--expiry-spread seconds (default 20; the issue's load is 10,000,000 over 60)
are written to each server, then sampled every second until 10 s after the
last TTL: keys left, server CPU spent (utime+stime from /proc/<pid>/stat) and
memory in use; CPU per expired key is the CPU used while they expired over
the keys expired. Expiry times are absolute (PXAT), set past the end of
the load, so that every key is there when the meter starts. The pool (and
Redis's maxmemory) is sized to the load.

Overwrite (--overwrite-minutes M, off by default): kvserver with a
--overwrite-memory pool (default 256 MiB) as its limit under allkeys-lru;
keys of 1,000-byte values totalling twice the limit are SET in random order
for M minutes, pipelined 100 at a time. Every reply is checked: the run
counts SETs answered with an error (the goal: none, -OOM least of all) and
samples the server's RSS (VmRSS) every 10 s against the limit.

Figures are printed as a table and, with --json, written as JSON. Both
servers bind 127.0.0.1 on ports picked here. Requests go through redis-py
(Debian python3-redis) with GETs pipelined 64 at a time, the same for both.
A benchmark, not a test: nothing is gated.
"""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_ready(port, proc, what):
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            if redis.Redis(port=port).ping():
                return
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    sys.exit(f"{what} did not answer on port {port}")


class Server:
    def __init__(self, kind, argv, port, workdir):
        self.kind, self.port = kind, port
        self.log = open(os.path.join(workdir, f"{kind}-{port}.log"), "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        wait_ready(port, self.proc, kind)
        self.client = redis.Redis(port=port)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


SEGMENT_SIZE = None  # --segment-size; None: the memory / 64 of each server


def segment_size(memory):
    return SEGMENT_SIZE or f"{max(64, memory // 64 // 1024)}K"


def start_kvserver(binary, memory, policy, workdir):
    port = free_port()
    # Small segments (--segment-size): eviction keeps a headroom of
    # segments for writers' open ones, which costs less of a small pool
    # with small segments.
    argv = [binary, "--listen=127.0.0.1", f"--resp_port={port}", "--control_port=0",
            "--transport=tcp", f"--pool_size={memory}", f"--segment_size={segment_size(memory)}",
            f"--index_buckets={max(1024, memory // 1024)}",
            f"--maxmemory_policy={policy}", "--insecure"]
    return Server("kvserver", argv, port, workdir)


def kvserver_bytes(memory):
    # The data arena plus its index (64-byte buckets), which is what the
    # store holds entries and keys in.
    return memory + max(1024, memory // 1024) * 64


def start_redis(memory, policy, workdir):
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--maxmemory", str(memory), "--maxmemory-policy", policy,
            "--dir", workdir]
    return Server("redis", argv, port, workdir)


def zipf_sampler(n, s, rng):
    # Inverse-CDF sampling over a precomputed table: exact Zipf(s) on 1..n.
    weights = [1.0 / (i ** s) for i in range(1, n + 1)]
    total = sum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    import bisect

    def sample():
        return min(bisect.bisect_left(cdf, rng.random()), n - 1)
    return sample


def make_trace(kind, requests, keys, seed):
    rng = random.Random(seed)
    zipf = zipf_sampler(keys, 0.99, rng)
    trace, scan_next = [], 0
    for _ in range(requests):
        if kind == "scan" and rng.random() < 1 / 3:
            trace.append(f"scan:{scan_next}")
            scan_next += 1
        else:
            trace.append(f"key:{zipf()}")
    return trace


def replay(server, trace, value):
    c, hits = server.client, 0
    batch = 64
    for i in range(0, len(trace), batch):
        keys = trace[i:i + batch]
        p = c.pipeline(transaction=False)
        for k in keys:
            p.get(k)
        got = p.execute()
        p = c.pipeline(transaction=False)
        for k, v in zip(keys, got):
            if v is None:
                p.set(k, value)
            else:
                hits += 1
        p.execute()
    return hits / len(trace)


def info(server):
    return server.client.info()


def hit_ratio(args, workdir, value):
    rows = []
    for trace_kind in ("zipf", "scan"):
        trace = make_trace(trace_kind, args.requests, args.keys, args.seed)
        for kind, policy in (("kvserver", "allkeys-lru"), ("kvserver", "allkeys-lfu"),
                             ("redis", "allkeys-lru"), ("redis", "allkeys-lfu")):
            s = (start_kvserver(args.kvserver, args.memory, policy, workdir) if kind == "kvserver"
                 else start_redis(kvserver_bytes(args.memory), policy, workdir))
            try:
                cpu0, t0 = cpu_seconds(s.proc.pid), time.time()
                ratio = replay(s, trace, value)
                cpu = cpu_seconds(s.proc.pid) - cpu0
                elapsed = time.time() - t0
                inf = info(s)
                keys = s.client.dbsize()
                if kind == "kvserver":
                    # Segments in use (dead space included) plus the index.
                    per_key = (int(inf["used_memory"]) + int(inf["kvstore_index_bytes"])) / max(keys, 1)
                    evicted = int(inf.get("evicted_keys", 0))
                else:
                    per_key = int(inf["used_memory"]) / max(keys, 1)
                    evicted = int(inf.get("evicted_keys", 0))
                rows.append({"trace": trace_kind, "server": kind, "policy": policy,
                             "hit_ratio": round(ratio, 4), "keys_cached": keys,
                             "bytes_per_key": round(per_key, 1), "evicted": evicted,
                             "ops_per_s": round(2 * len(trace) / elapsed),
                             "cpu_us_per_request": round(cpu * 1e6 / len(trace), 2)})
                print(f"{trace_kind:5} {kind:9} {policy:12} hit {ratio:.4f}  cached {keys:8}  "
                      f"{per_key:7.1f} B/key  evicted {evicted:8}  "
                      f"cpu {cpu * 1e6 / len(trace):6.2f} us/request", flush=True)
            finally:
                s.stop()
    return rows


def expiry(args, workdir):
    rows = []
    # 32-byte values: a 96-byte entry and an index slot each, twice over.
    memory = max(1 << 30, args.expiry_keys * 192)
    spread_ms = args.expiry_spread * 1000
    for kind in ("kvserver", "redis"):
        s = (start_kvserver(args.kvserver, memory, "noeviction", workdir) if kind == "kvserver"
             else start_redis(kvserver_bytes(memory), "noeviction", workdir))
        try:
            c = s.client
            rng = random.Random(args.seed)
            n = args.expiry_keys
            # Absolute expiry times past the end of the load (allowing 50 k SETs/s
            # SETs/s through redis-py), so that all n keys are there when
            # sampling starts and the whole spread expires under the meter.
            load_ms = 2000 + n // 50
            start_ms = int(time.time() * 1000) + load_ms
            p = c.pipeline(transaction=False)
            for i in range(n):
                p.set(f"e:{i}", "v" * 32, pxat=start_ms + rng.randint(1000, spread_ms))
                if i % 1000 == 999:
                    p.execute()
                    p = c.pipeline(transaction=False)
            p.execute()
            # Sampling starts when the first key is due (or at once if the
            # load ran late: keys_at_start says how many were still there).
            time.sleep(max(0.0, start_ms / 1000 + 1 - time.time()))
            cpu0 = cpu_seconds(s.proc.pid)
            samples = []
            for second in range(args.expiry_spread + 11):
                inf = c.info()
                mem = int(inf["used_memory"]) if kind == "redis" else int(inf.get("live_bytes", 0))
                samples.append({"t": second, "keys": c.dbsize(),
                                "cpu_s": round(cpu_seconds(s.proc.pid) - cpu0, 3),
                                "memory_bytes": mem})
                time.sleep(1)
            expired = samples[0]["keys"] - samples[-1]["keys"]
            cpu = samples[-1]["cpu_s"]
            rows.append({"server": kind, "keys": n, "keys_at_start": samples[0]["keys"],
                         "expired": expired,
                         "cpu_us_per_expired_key": round(cpu * 1e6 / max(expired, 1), 3),
                         "samples": samples})
            print(f"expiry {kind:9} {n} keys ({samples[0]['keys']} at the first sample): "
                  f"{expired} expired in {len(samples) - 1} s, "
                  f"{cpu * 1e6 / max(expired, 1):.3f} us CPU per expired key; memory "
                  + " ".join(f"{x['t']}s:{x['memory_bytes'] >> 20}M/{x['keys']}"
                             for x in samples[::max(1, args.expiry_spread // 6)]), flush=True)
        finally:
            s.stop()
    return rows


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def overwrite(args, workdir):
    memory = args.overwrite_memory
    s = start_kvserver(args.kvserver, memory, "allkeys-lru", workdir)
    try:
        c, rng = s.client, random.Random(args.seed)
        value = b"o" * 1000
        keys = 2 * memory // 1000
        sets = errors = 0
        first_error = None
        samples = []
        cpu0 = cpu_seconds(s.proc.pid)
        t0 = time.time()
        next_sample = t0
        while time.time() - t0 < args.overwrite_minutes * 60:
            p = c.pipeline(transaction=False)
            for _ in range(100):
                p.set(f"w:{rng.randrange(keys)}", value)
            for r in p.execute(raise_on_error=False):
                sets += 1
                if r is not True:
                    errors += 1
                    first_error = first_error or str(r)
            if time.time() >= next_sample:
                inf = c.info()
                samples.append({"t": round(time.time() - t0), "rss_bytes": rss_bytes(s.proc.pid),
                                "keys": c.dbsize(), "evicted": int(inf.get("evicted_keys", 0))})
                print(f"overwrite t={samples[-1]['t']:4}s rss {samples[-1]['rss_bytes'] >> 20} MiB "
                      f"keys {samples[-1]['keys']} sets {sets} errors {errors}", flush=True)
                next_sample += 10
        cpu = cpu_seconds(s.proc.pid) - cpu0
        max_rss = max(x["rss_bytes"] for x in samples)
        row = {"limit_bytes": memory, "keys": keys, "sets": sets, "errors": errors,
               "first_error": first_error, "max_rss_bytes": max_rss,
               "rss_over_limit_bytes": max_rss - memory,
               "cpu_us_per_set": round(cpu * 1e6 / max(sets, 1), 2), "samples": samples}
        print(f"overwrite: {sets} SETs over {keys} keys ({2 * memory >> 20} MiB of values into a "
              f"{memory >> 20} MiB limit), {errors} errors{' (' + first_error + ')' if errors else ''}; "
              f"max RSS {max_rss >> 20} MiB = limit + {(max_rss - memory) >> 20} MiB", flush=True)
        return row
    finally:
        s.stop()


def main():
    global SEGMENT_SIZE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--keys", type=int, default=200000)
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--memory", type=int, default=16 << 20,
                    help="kvserver pool bytes; Redis gets that plus the index")
    ap.add_argument("--segment-size",
                    help="kvserver --segment_size (K/M suffix; default: the memory / 64, "
                         "at least 64K, as docs/operations.md advises for a cache)")
    ap.add_argument("--seed", type=int, default=int(time.time()) & 0xFFFF)
    ap.add_argument("--json")
    ap.add_argument("--kvserver", default=os.path.join(ROOT, "bazel-bin/server/kvserver"))
    ap.add_argument("--skip-expiry", action="store_true")
    ap.add_argument("--skip-hit-ratio", action="store_true")
    ap.add_argument("--expiry-keys", type=int, default=1000000)
    ap.add_argument("--expiry-spread", type=int, default=20,
                    help="seconds the TTLs are spread over (from 1 s)")
    ap.add_argument("--overwrite-minutes", type=float, default=0)
    ap.add_argument("--overwrite-memory", type=int, default=256 << 20)
    args = ap.parse_args()
    SEGMENT_SIZE = args.segment_size
    print(f"seed {args.seed}, kvserver segments {segment_size(args.memory)} "
          f"({segment_size(args.overwrite_memory)} in the overwrite run)", flush=True)
    if not args.skip_hit_ratio:
        print(f"hit ratio: memory {args.memory} B (kvserver pool; Redis maxmemory "
              f"{kvserver_bytes(args.memory)} B); {args.requests} requests over {args.keys} keys; "
              f"values {args.value_bytes} B", flush=True)
    out = {"seed": args.seed, "memory": args.memory}
    with tempfile.TemporaryDirectory() as workdir:
        if not args.skip_hit_ratio:
            out["hit_ratio"] = hit_ratio(args, workdir, b"x" * args.value_bytes)
        if not args.skip_expiry:
            out["expiry"] = expiry(args, workdir)
        if args.overwrite_minutes > 0:
            out["overwrite"] = overwrite(args, workdir)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
