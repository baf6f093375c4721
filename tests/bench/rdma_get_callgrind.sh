#!/usr/bin/env bash
# Client CPU cost of a one-sided GET in INSTRUCTIONS, against perftest's
# ib_read_lat per RDMA READ, counted with valgrind's callgrind inside the
# Soft-RoCE qemu VM (tests/rxe/vm-run.sh). Instruction counts do not depend
# on how fast the emulation runs, so unlike rdma_get_bench.sh's latencies
# these figures hold for any x86-64 host running the same binaries and
# libraries on a CPU with the same features (glibc and libxxhash choose
# their code by CPUID; the VM's `-cpu max` has AVX2). Cases: 64 B GETs with
# the location cache (hits: one entry READ; a single node has no fence
# READ), 64 B GETs with the cache off (misses: the buckets' READ, then the
# entry READ), and 1 MiB GETs through Get() (a copy) and GetInto (zero
# copy), each against ib_read_lat of the same size. A benchmark, not a
# test: it prints figures and gates nothing.
#
# Usage: tests/bench/rdma_get_callgrind.sh [--quick] [--out DIR] [--json FILE]
#            [--kvserver BIN --kvctl BIN] [--no-build] [--timeout S]
#   --quick          N = 4096 (64 B) and 20 (1 MiB) instead of 8192 and 50
#   --out DIR        keep the raw results there: callgrind files, kvctl's JSON,
#                    perftest's output (default: a temporary directory,
#                    removed after a successful run)
#   --json FILE      also write the figures as JSON to FILE (default:
#                    DIR/rdma_get_callgrind.json when --out DIR is given)
#   --kvserver BIN, --kvctl BIN
#                    measure these binaries (both or neither); without them
#                    the script runs `bazel build -c opt` and takes the two
#                    from `bazel info -c opt bazel-bin`
#   --no-build       without --kvserver/--kvctl: use the -c opt binaries as
#                    they are
#   --timeout S      kill the VM after S seconds (default 3600; a full run
#                    takes about 12 minutes on 2 cores, --quick about 9)
#
# Method. Each client runs under `valgrind --tool=callgrind
# --separate-threads=yes` twice, with N and 2N operations, and every figure
# is (count at 2N - count at N) / N, so start-up, connection set-up and exit
# cancel out. kvserver and the ib_read_lat servers run natively. Figures:
#   kvstore Get()  inclusive instructions of the KvClient::Get (GetInto) call
#                  per GET, from the call graph: what the client library
#                  executes for one GET, its amortised share of reporting
#                  reads to the server (a gRPC call per 4096 GETs, on the
#                  caller's thread; N is a multiple of 4096 so that the share
#                  is exact) included;
#   kvctl loop     all instructions of the bench's worker thread per GET:
#                  Get() plus kvctl's own key formatting, random numbers and
#                  latency histogram;
#   ib_read_lat    instructions per READ of perftest's measurement loop (the
#                  function that calls the provider's poll_cq: post, poll,
#                  time stamp), without the report it prints afterwards;
#   doorbells, polls  calls per operation of the rxe provider's post_send and
#                  poll_cq (in rxe loopback a READ has completed by the time
#                  its doorbell system call returns, so no GET spins: a
#                  figure above 1 per READ round would mean spinning, and the
#                  count would then depend on timing).
# Only user-space instructions are counted: the system call that rings the
# doorbell and rxe's work in the kernel are not, on either side. Valgrind
# counts a `rep movsb` once per byte moved, and glibc's memcpy uses it for
# large copies: the 1 MiB Get() row's copy is in it as ~1 instruction per
# byte (the breakdown line shows how much); GetInto copies nothing.
# The hit row's top functions (inclusive instructions per GET, within the
# Get() call) follow the table, and all rows' are in the JSON.
#
# Exit status: 0 when every measurement ran; 1 when a build, the VM or a
# measurement failed; 2 bad usage; 77 skipped (no qemu-system-x86_64, or no
# valgrind or ib_read_lat: deploy/setup.sh installs them; the guest runs the
# host's).
# Wrap it in the machine's VM lock if it has one (flock /tmp/kv/vm.lock ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
QUICK=0
OUT=
JSON=
BUILD=1
TIMEOUT=3600
KVSERVER_BIN=
KVCTL_BIN=
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case "$1" in
    --quick) QUICK=1 && shift ;;
    --no-build) BUILD=0 && shift ;;
    --out) OUT=${2:?--out needs a directory} && shift 2 ;;
    --json) JSON=${2:?--json needs a file} && shift 2 ;;
    --kvserver) KVSERVER_BIN=${2:?--kvserver needs a binary} && shift 2 ;;
    --kvctl) KVCTL_BIN=${2:?--kvctl needs a binary} && shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs seconds} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) echo "rdma_get_callgrind: unknown argument $1 (see --help)" >&2 && exit 2 ;;
    esac
done
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "rdma_get_callgrind: --timeout needs seconds" >&2; exit 2; }
if [[ -n $KVSERVER_BIN || -n $KVCTL_BIN ]]; then
    [[ -x $KVSERVER_BIN && -x $KVCTL_BIN ]] ||
        { echo "rdma_get_callgrind: --kvserver and --kvctl need two executables" >&2; exit 2; }
fi
if ! command -v "${KV_VM_QEMU:-qemu-system-x86_64}" >/dev/null; then
    echo "rdma_get_callgrind: SKIPPED: qemu-system-x86_64 not found (deploy/setup.sh installs it)" >&2
    exit 77
fi
# The guest sees the host's filesystem: these must be installed here.
for tool in valgrind ib_read_lat; do
    command -v "$tool" >/dev/null ||
        { echo "rdma_get_callgrind: SKIPPED: $tool not found (deploy/setup.sh installs it)" >&2; exit 77; }
done

if [[ -z $KVSERVER_BIN ]]; then
    # -c opt, like perftest's own binaries: -O0 code would count the
    # compiler's, not the protocol's, instructions.
    if ((BUILD)); then
        echo "==> bazel build -c opt //server:kvserver //client/kvctl"
        log=$(mktemp /tmp/rdma_get_callgrind.build.XXXXXX)
        bazel build -c opt //server:kvserver //client/kvctl >"$log" 2>&1 ||
            { tail -n 30 "$log" >&2; rm -f "$log"; exit 1; }
        rm -f "$log"
    fi
    OPT_BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
    KVSERVER_BIN=$OPT_BIN/server/kvserver
    KVCTL_BIN=$OPT_BIN/client/kvctl/kvctl
    [[ -x $KVSERVER_BIN && -x $KVCTL_BIN ]] ||
        { echo "rdma_get_callgrind: no -c opt build in $OPT_BIN (run without --no-build)" >&2; exit 1; }
fi

KEEP=1
[[ -n $OUT ]] || { OUT=$(mktemp -d /tmp/kvbench-rdma-cg.XXXXXX) && KEEP=0; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
((KEEP)) && [[ -z $JSON ]] && JSON=$OUT/rdma_get_callgrind.json
# A fresh start: stale callgrind files of an earlier run would be summed in.
rm -f "$OUT"/cg_* "$OUT"/load_* "$OUT/results.env" "$OUT/kvserver.log"
# The guest runs copies, so a concurrent rebuild cannot swap them mid-run.
cp "$KVSERVER_BIN" "$OUT/kvserver"
cp "$KVCTL_BIN" "$OUT/kvctl"
chmod u+w "$OUT/kvserver" "$OUT/kvctl"

ENVS=()
((QUICK)) && ENVS+=(--env KV_CALLGRIND_OPS=4096 --env KV_CALLGRIND_BIG_OPS=20)
while IFS= read -r name; do ENVS+=(--env "$name"); done < <(compgen -e | grep -E '^KV_CALLGRIND_|^KV_BENCH_(DEV|IP)$' || true)

echo "==> booting the Soft-RoCE VM and running tests/bench/rdma_get_callgrind_guest.sh in it"
rc=0
tests/rxe/vm-run.sh --quiet --timeout "$TIMEOUT" --smp 2 --rw "$OUT" "${ENVS[@]}" \
    -- "$ROOT/tests/bench/rdma_get_callgrind_guest.sh" "$OUT" || rc=$?
if ((rc != 0)); then
    echo "rdma_get_callgrind: the measurement failed (exit $rc); raw results kept in $OUT" >&2
    exit 1
fi

python3 - "$OUT" "$JSON" <<'PY' || { echo "rdma_get_callgrind: could not read the results in $OUT" >&2; exit 1; }
import collections, glob, json, os, re, sys

out, json_path = sys.argv[1], sys.argv[2]

# --- callgrind's output format (valgrind's docs/cl-format) -------------------
# Cost lines follow fn= (self cost) or, right after a calls= line, give the
# inclusive cost of that call. Names are compressed: "(12) name" defines id
# 12 of its kind, "(12)" refers to it; ob/cob, fl/fi/fe/cfi/cfl, fn/cfn
# share one id space each. A function is (object, name).
SPACE = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
         "fn": "fn", "cfn": "fn"}

def parse(path):
    ids = {"ob": {}, "fl": {}, "fn": {}}

    def name(kind, v):
        m = re.match(r"\((\d+)\)(?: (.*))?$", v)
        if not m:
            return v
        if m.group(2) is not None:
            ids[SPACE[kind]][m.group(1)] = m.group(2)
        return ids[SPACE[kind]][m.group(1)]

    self_cost = collections.Counter()
    edges = collections.defaultdict(lambda: [0, 0])  # (caller, callee) -> [calls, Ir]
    ob = fn = cob = cfn = call = total = None
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line[0] == "#":
            continue
        if line[0].isdigit() or line[0] in "+-*":
            f = line.split()
            cost = int(f[1]) if len(f) > 1 else 0
            if call is not None:
                edges[call][1] += cost
                call = None
            else:
                self_cost[(ob, fn)] += cost
            continue
        if line.startswith(("summary:", "totals:")):
            total = int(line.split(":")[1].split()[0])
            continue
        k, _, v = line.partition("=")
        if k in SPACE:
            v = name(k, v)
        if k == "ob":
            ob = v
        elif k == "fn":
            fn = v
        elif k == "cob":
            cob = v
        elif k == "cfn":
            cfn = v
        elif k == "calls":
            call = ((ob, fn), (cob or ob, cfn))
            edges[call][0] += int(v.split()[0])
            cob = None  # a cob= names the object of the next call only
    return {"total": total, "self": self_cost, "edges": dict(edges)}

def load(case, tag):
    files = sorted(glob.glob(os.path.join(out, f"cg_{case}_{tag}.out-*")))
    if not files:
        raise SystemExit(f"no callgrind output cg_{case}_{tag}.out-* in {out}")
    return [parse(f) for f in files]  # one per thread

def inclusive(t):
    inc = collections.Counter(t["self"])
    for (a, b), (_, c) in t["edges"].items():
        if a != b:
            inc[a] += c
    return inc

def matching(t, pattern):
    rx = re.compile(pattern)
    keys = set(t["self"]) | {b for _, b in t["edges"]}
    return {k for k in keys if k[1] and rx.search(k[1])}

def calls_into(run, targets):
    return sum(n for t in run for (a, b), (n, _) in t["edges"].items() if b in targets and a not in targets)

def rxe_callee(run, caller_pattern):
    """The rxe provider's function called from callers matching the pattern."""
    rx, c = re.compile(caller_pattern), collections.Counter()
    for t in run:
        for (a, b), (n, _) in t["edges"].items():
            if a[1] and rx.search(a[1]) and b[0] and "librxe" in os.path.basename(b[0]):
                c[b] += n
    return c.most_common(1)[0][0] if c else None

def within(t, roots):
    """Per function called inside the roots' subtree: [calls, inclusive Ir] of
    those calls only (a function also called elsewhere, malloc say, is
    charged only for the calls made under the roots)."""
    children = collections.defaultdict(set)
    for a, b in t["edges"]:
        children[a].add(b)
    seen, todo = set(roots), list(roots)
    while todo:
        for b in children[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    res = collections.defaultdict(lambda: [0, 0])
    inc = inclusive(t)
    for r in roots:
        res[r][1] += inc[r]
        res[r][0] += sum(n for (a, b), (n, _) in t["edges"].items() if b == r and a not in roots)
    for (a, b), (n, c) in t["edges"].items():
        if a in seen and b not in roots and a != b:
            res[b][0] += n
            res[b][1] += c
    return res

def env(path):
    r = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").partition("=")
        r[k] = v
    return r

def short(name):
    """A function name without its argument list, for the tables."""
    name = name.replace("absl::debian3::", "absl::")
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i] + "()" + name[name.rfind(")") + 1:]
    return name

res = env(os.path.join(out, "results.env"))
n_small, n_big = int(res["ops"]), int(res["big_ops"])
runs = {(c, t): load(c, t) for c in ("hit", "miss", "big", "bigzc", "iblat", "iblatbig") for t in ("N", "2N")}
probe = runs["hit", "2N"]
POLL = rxe_callee(probe, r"OpEngine::PollOnce\(")
POST = rxe_callee(probe, r"QueuePair::Post(SendChain|RdmaBatch)\(")
if POLL is None or POST is None:
    raise SystemExit("the rxe provider's poll_cq/post_send were not found under PollOnce/PostSendChain/PostRdmaBatch")

def kv_case(case, n, api, doorbells):
    pat = rf"ClientImpl::{api}\("
    fig, top = {}, {}
    for tag in ("N", "2N"):
        run = runs[case, tag]
        worker = [t for t in run if matching(t, r"TimedWorker\(")]
        if len(worker) != 1:
            raise SystemExit(f"cg_{case}_{tag}: no single bench worker thread")
        w = worker[0]
        roots = matching(w, pat)
        if not roots:
            raise SystemExit(f"cg_{case}_{tag}: no {pat} in the worker thread")
        inc = inclusive(w)
        fig[tag] = {"get": sum(inc[r] for r in roots), "get_calls": calls_into([w], roots),
                    "loop": w["total"], "process": sum(t["total"] for t in run),
                    "doorbells": calls_into(run, {POST}), "polls": calls_into(run, {POLL})}
        top[tag] = within(w, roots)
    d = {k: (fig["2N"][k] - fig["N"][k]) / n for k in fig["N"]}
    if round(d["get_calls"]) != 1:
        raise SystemExit(f"{case}: {d['get_calls']:.2f} {api}() calls per operation, not 1")
    rows = []
    for k, (c2, i2) in top["2N"].items():
        c1, i1 = top["N"].get(k, (0, 0))
        rows.append({"function": k[1], "object": os.path.basename(k[0] or "?"),
                     "ir_per_op": round((i2 - i1) / n, 1), "calls_per_op": round((c2 - c1) / n, 3)})
    rows.sort(key=lambda r: -r["ir_per_op"])
    # Leaf functions only: their inclusive cost is their own.
    copy = sum(r["ir_per_op"] for r in rows if re.match(r"__mem(cpy|move)", r["function"]))
    xxh = sum(r["ir_per_op"] for r in rows if re.match(r"XXH3_64bits_(update|digest)", r["function"]))
    return {"n": n, "kvstore_get_ir": round(d["get"], 1), "kvctl_loop_ir": round(d["loop"], 1),
            "kvctl_all_threads_ir": round(d["process"], 1), "doorbells": round(d["doorbells"], 3),
            "polls": round(d["polls"], 3), "expected_doorbells": doorbells,
            "memcpy_ir": round(copy, 1), "xxh3_ir": round(xxh, 1), "top": rows[:40]}

def ib_case(case, n):
    fig = {}
    for tag, ops in (("N", n), ("2N", 2 * n)):
        run = runs[case, tag]
        callers = collections.Counter()
        for t in run:
            for (a, b), (k, _) in t["edges"].items():
                if b == POLL and os.path.basename(a[0] or "") == "ib_read_lat":
                    callers[a] += k
        if not callers:
            raise SystemExit(f"cg_{case}_{tag}: ib_read_lat never called the provider's poll_cq")
        loop_fn = callers.most_common(1)[0][0]
        t = next(t for t in run if loop_fn in t["self"])
        # The loop's own instructions and the calls it makes per iteration;
        # the one-off calls (the report and its sorting) are left out.
        loop = t["self"][loop_fn] + sum(c for (a, b), (k, c) in t["edges"].items()
                                        if a == loop_fn and b != loop_fn and k >= ops // 2)
        fig[tag] = {"loop": loop, "process": sum(x["total"] for x in run),
                    "doorbells": calls_into(run, {POST}), "polls": calls_into(run, {POLL})}
    d = {k: (fig["2N"][k] - fig["N"][k]) / n for k in fig["N"]}
    return {"n": n, "function": loop_fn[1], "ib_read_lat_ir": round(d["loop"], 1),
            "ib_read_lat_all_ir": round(d["process"], 1), "doorbells": round(d["doorbells"], 3),
            "polls": round(d["polls"], 3)}

cases = [("hit", "64 B GET, location cache hit", "hit", "Get", 1, "iblat", n_small),
         ("miss", "64 B GET, cache off (2 READs)", "miss", "Get", 2, "iblat", n_small),
         ("get_1mib", "1 MiB GET, Get() (copy)", "big", "Get", 1, "iblatbig", n_big),
         ("get_1mib_zero_copy", "1 MiB GET, GetInto (zero copy)", "bigzc", "GetInto", 1, "iblatbig", n_big)]
report = {"ops": n_small, "big_ops": n_big, "kernel": res.get("kernel"), "nproc": res.get("nproc"),
          "valgrind": res.get("valgrind"), "rxe_poll_cq": POLL[1], "rxe_post_send": POST[1], "cases": {}}
ib = {"iblat": ib_case("iblat", n_small), "iblatbig": ib_case("iblatbig", n_big)}
warnings = []
for key, label, kv, api, doorbells, peer, n in cases:
    k, p = kv_case(kv, n, api, doorbells), ib[peer]
    k["label"] = label
    k["ib_read_lat"] = p
    k["ratio"] = round(k["kvstore_get_ir"] / p["ib_read_lat_ir"], 2) if p["ib_read_lat_ir"] else None
    report["cases"][key] = k
    if abs(k["doorbells"] - doorbells) > 0.01:
        warnings.append(f"{label}: {k['doorbells']:.2f} doorbells per GET, not {doorbells}: "
                        "GETs were redone (slow READs or failed checks); its figures include that")
    if k["polls"] > k["doorbells"] + 0.01 or p["polls"] > p["doorbells"] + 0.01:
        warnings.append(f"{label}: more CQ polls than doorbells (kvstore {k['polls']:.2f}, ib_read_lat "
                        f"{p['polls']:.2f}): spinning is counted, and depends on timing")

print()
print(f"Client instructions per operation, callgrind (valgrind {res.get('valgrind', '?').split('-')[-1]}) in the "
      f"Soft-RoCE VM (kernel {res.get('kernel')}), difference of an N and a 2N run")
print("user space only (the doorbell system call and rxe's kernel work are not counted on either side)")
head = ("case", "N", "kvstore Get()", "kvctl loop", "ib_read_lat", "ratio", "doorbells kv/ib", "polls kv/ib")
rows = [head]
for key, label, *_ in cases:
    c = report["cases"][key]
    p = c["ib_read_lat"]
    rows.append((label, str(c["n"]), f"{c['kvstore_get_ir']:,.0f}", f"{c['kvctl_loop_ir']:,.0f}",
                 f"{p['ib_read_lat_ir']:,.0f}", f"{c['ratio']:.2f}x" if c["ratio"] else "n/a",
                 f"{c['doorbells']:.2f}/{p['doorbells']:.2f}", f"{c['polls']:.2f}/{p['polls']:.2f}"))
w = [max(len(r[i]) for r in rows) for i in range(len(head))]
for r in rows:
    print("  " + "  ".join(r[i].ljust(w[i]) if i == 0 else r[i].rjust(w[i]) for i in range(len(head))))
print()
print("kvstore Get(): inclusive Ir of the KvClient::Get/GetInto call; kvctl loop: the bench worker thread per GET")
print("(Get() + key formatting, RNG, latency histogram); ib_read_lat: its measurement loop per READ (post,")
print("poll, time stamp). ratio = kvstore Get() / ib_read_lat. A miss is two dependent READs: twice ib_read_lat")
print("is its floor. Goal: hit <= 1.50x.")
for key, label, *_ in cases:
    c = report["cases"][key]
    if key.startswith("get_1mib"):
        print(f"  {label}: of which XXH3 checksum {c['xxh3_ir']:,.0f}, memcpy {c['memcpy_ir']:,.0f} "
              "(valgrind counts glibc's rep movsb once per byte)")
hit = report["cases"]["hit"]
print()
print(f"Top functions of the hit GET: inclusive Ir per GET within the Get() call (N={hit['n']})")
for r in hit["top"][:20]:
    print(f"  {r['ir_per_op']:>8,.1f}  {r['calls_per_op']:>5.2f}x  {short(r['function'])[:110]}  [{r['object']}]")
for wmsg in warnings:
    print("WARNING:", wmsg)
ratio = lambda k: f"{report['cases'][k]['ratio']:.2f}x" if report["cases"][k]["ratio"] else "n/a"
print()
print(f"RESULT hit_ir_ratio={ratio('hit')} miss_ir_ratio={ratio('miss')} get_1mib_ir_ratio={ratio('get_1mib')} "
      f"get_1mib_zero_copy_ir_ratio={ratio('get_1mib_zero_copy')} hit_ir={hit['kvstore_get_ir']:.0f} "
      f"ib_read_lat_ir={hit['ib_read_lat']['ib_read_lat_ir']:.0f}")
report["warnings"] = warnings
if json_path:
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1)
    print("JSON:", json_path)
PY
((KEEP)) || rm -rf "$OUT"
exit 0
