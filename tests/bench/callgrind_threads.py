#!/usr/bin/env python3
# Instructions per SET from callgrind dumps of a kvstore cluster, split by
# the kind of thread that ran them. Used by replication_vs_redis.sh
# --callgrind; a benchmark helper, it gates nothing.
#
#   callgrind_threads.py add CSV R PIPELINE SETS FILE...   append one row
#   callgrind_threads.py table CSV [JSON]                  print the rows
#
# FILE...: the per-thread dumps (valgrind --tool=callgrind
# --separate-threads=yes) of every node for one measured load of SETS SETs.
# A thread is a RESP loop if its dump names RespLoop::Run, a backup's
# replication connection if it names PeerListener::Serve, else "other"
# (etcd keepalives, timers, gRPC: idle work that grows with the run's
# length, which callgrind stretches, so it is shown apart). The write path
# is the loops and the backup connections: what one replicated SET costs
# in user space, every node summed. Instruction counts do not depend on
# how busy the machine is, so two builds compare to the instruction; they
# leave out the kernel (system calls, the copies of sockets) entirely.
import csv
import json
import os
import re
import sys

FIELDS = ["R", "pipeline", "sets", "loop_ir_per_set", "backup_ir_per_set", "write_path_ir_per_set",
          "other_ir_per_set", "threads"]


def kind_and_total(path):
    with open(path, errors="replace") as f:
        text = f.read()
    m = re.search(r"^totals: (\d+)", text, re.M) or re.search(r"^summary: (\d+)", text, re.M)
    total = int(m.group(1)) if m else 0
    if "RespLoop::Run" in text:
        return "loop", total
    if "PeerListener::Serve" in text:
        return "backup", total
    return "other", total


def add(csv_path, r, pipeline, sets, files):
    sums = {"loop": 0, "backup": 0, "other": 0}
    for path in files:
        kind, total = kind_and_total(path)
        sums[kind] += total
    sets = int(sets)
    row = {
        "R": r, "pipeline": pipeline, "sets": sets,
        "loop_ir_per_set": round(sums["loop"] / sets),
        "backup_ir_per_set": round(sums["backup"] / sets),
        "write_path_ir_per_set": round((sums["loop"] + sums["backup"]) / sets),
        "other_ir_per_set": round(sums["other"] / sets),
        "threads": len(files),
    }
    new = not os.path.exists(csv_path)
    with open(csv_path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    print(f"    P{pipeline}: {row['write_path_ir_per_set']} instructions per SET on the write path "
          f"(RESP loops {row['loop_ir_per_set']}, backups {row['backup_ir_per_set']}; "
          f"other threads {row['other_ir_per_set']})")


def table(csv_path, json_path=None):
    rows = list(csv.DictReader(open(csv_path)))
    base = {r["pipeline"]: float(r["write_path_ir_per_set"]) for r in rows if r["R"] == "1"}
    head = ["R", "pipeline", "SETs", "write path Ir/SET", "ratio", "RESP loops", "backups", "other threads"]
    lines = [head]
    for r in rows:
        b = base.get(r["pipeline"])
        ratio = f"{float(r['write_path_ir_per_set']) / b:.2f}" if b else "-"
        r["ratio_to_r1"] = float(ratio) if b else None
        lines.append([r["R"], r["pipeline"], r["sets"], r["write_path_ir_per_set"], ratio,
                      r["loop_ir_per_set"], r["backup_ir_per_set"], r["other_ir_per_set"]])
    width = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(str(v).rjust(w) for v, w in zip(line, width)))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"instructions_per_set": rows}, f, indent=1)
        print(f"JSON: {json_path}")


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "add":
        add(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
    else:
        sys.stderr.write("usage: callgrind_threads.py add CSV R PIPELINE SETS FILE... | table CSV [JSON]\n")
        sys.exit(2)
