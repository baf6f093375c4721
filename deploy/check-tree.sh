#!/usr/bin/env bash
# Checks the source tree keeps the habits the project agreed on, and writes
# the result as JUnit XML so deploy/test.sh counts each check as a test case.
#
# Usage: deploy/check-tree.sh [--xml FILE] [--fix]
#
# Checks (one test case each):
#   clang_format        every C++ file matches .clang-format (clang-format 14)
#   no_downcasts        no dynamic_cast under client/: DataPath is wide enough
#   layering            every #include between packages of common/, server/ and
#                       client/ (non-test files) is an arrow deploy/layering.txt
#                       allows, and that table only points to rows above
#                       (package arrows form no cycle)
#   file_length         no non-test .cc under server/, client/ or common/ is over
#                       600 lines (split it by job)
#   function_length     no function in those files is over 80 lines without a
#                       comment above it that says why it is long
#   self_contained      no file refers to a path outside the repository
#
# Options:
#   --xml FILE   also write the results there (JUnit XML)
#   --fix        run clang-format -i on the files that fail clang_format
#   -h, --help   this text
#
# Exit status: 0 when every check passed, 1 otherwise, 2 on bad usage.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

XML=""
FIX=0
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case "$1" in
    --xml) XML=${2:?--xml needs a file}; shift ;;
    --fix) FIX=1 ;;
    -h | --help) usage && exit 0 ;;
    *) echo "check-tree: unknown argument $1 (see --help)" >&2 && exit 2 ;;
    esac
    shift
done

# Tracked and new (not ignored) files, so a check also sees work not yet committed.
list_files() { git ls-files --cached --others --exclude-standard -- "$@" | grep -v '^third_party/' || true; }

NAMES=() OUTPUTS=()
record() { # record NAME OUTPUT: an empty OUTPUT means passed
    NAMES+=("$1")
    OUTPUTS+=("$2")
    if [[ -z $2 ]]; then
        echo "    ok      $1"
    else
        echo "    FAILED  $1"
        sed 's/^/            /' <<<"$2" | head -n 20
    fi
}

mapfile -t CXX < <(list_files '*.cc' '*.h' | while read -r f; do [[ -f $f ]] && echo "$f"; done)

# clang_format: clang-format prints nothing for a clean file with --dry-run.
out=""
if ! command -v clang-format >/dev/null; then
    out="clang-format not found (apt-get install clang-format)"
else
    bad=()
    for f in "${CXX[@]}"; do
        if [[ -n $(clang-format --dry-run "$f" 2>&1) ]]; then bad+=("$f"); fi
    done
    if ((${#bad[@]})); then
        if ((FIX)); then
            clang-format -i "${bad[@]}"
            echo "    formatted ${#bad[@]} file(s)"
        else
            out=$(printf '%s: not clang-formatted (deploy/check-tree.sh --fix)\n' "${bad[@]}")
        fi
    fi
fi
record clang_format "$out"

record no_downcasts "$(grep -rn 'dynamic_cast' client/ || true)"

# layering: deploy/layering.txt is the table of allowed package arrows.
out=$(python3 - deploy/layering.txt "${CXX[@]}" <<'PY'
import os, re, sys
table_path, files = sys.argv[1], sys.argv[2:]
rows, order, problems = {}, [], []
for n, line in enumerate(open(table_path, encoding="utf-8"), 1):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    pkg, _, targets = line.partition(":")
    rows[pkg.strip()] = targets.split()
    order.append(pkg.strip())

def covers(target, path):  # does a target cover an included file's path?
    if target.endswith("/**"):
        base = target[:-3]
        return path.startswith(base + "/")
    if target.endswith(".h"):
        return path == target
    return os.path.dirname(path) == target

# The table itself: a package target points only to rows above its own, so
# the allowed arrows are acyclic; a one-header target is a narrow exception.
for i, pkg in enumerate(order):
    for t in rows[pkg]:
        if t.endswith(".h"):
            continue
        below = [p for p in order[i:] if p == t or (t.endswith("/**") and p.startswith(t[:-3] + "/"))]
        if below:
            problems.append(f"{table_path}: {pkg} -> {t}: arrow to a row at or below its own ({below[0]})")

for path in files:
    if not re.match(r"(common|server|client)/", path):
        continue
    base = os.path.basename(path)
    if base.endswith("_test.cc") or "_test_util." in base or "/testing/" in path:
        continue
    pkg = os.path.dirname(path)
    if pkg not in rows:
        problems.append(f"{path}: package {pkg} has no row in {table_path}")
        continue
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        m = re.match(r'#include "((common|server|client|proto|third_party)/[^"]+)"', line)
        if not m or os.path.dirname(m.group(1)) == pkg:
            continue
        if not any(covers(t, m.group(1)) for t in rows[pkg]):
            problems.append(f"{path}:{n}: {pkg} -> {m.group(1)} is not an arrow {table_path} allows")
print("\n".join(problems))
PY
)
record layering "$out"

out=""
for f in "${CXX[@]}"; do
    [[ $f == *.cc && $f != *_test.cc && $f =~ ^(server|client|common)/ ]] || continue
    n=$(wc -l <"$f")
    ((n <= 600)) || out+="$f: $n lines (over 600: split it by job)"$'\n'
done
record file_length "${out%$'\n'}"

# function_length: a function defined at namespace level in a non-test .cc
# (signature line at column 0 ending in "{", body closed by "}" at column 0)
# may run to 80 lines; a longer one needs a comment right above it that says
# why it is long (the comment must contain the word "long").
out=$(python3 - "${CXX[@]}" <<'PY'
import re, sys
for path in sys.argv[1:]:
    if not path.endswith(".cc") or path.endswith("_test.cc"):
        continue
    if not re.match(r"(server|client|common)/", path):
        continue
    lines = open(path, encoding="utf-8").read().split("\n")
    start = None
    for i, line in enumerate(lines):
        if start is None:
            if (line.endswith("{") and line and not line[0].isspace()
                    and not re.match(r"(namespace|class|struct|enum|union|extern|typedef|using|#|})", line)):
                start = i
        elif line.startswith("}"):
            length = i - start + 1
            j = start - 1
            while j >= 0 and lines[j] and not lines[j].startswith("//") and not lines[j].endswith(";"):
                j -= 1  # continuation lines of a multi-line signature
            comment = []
            while j >= 0 and lines[j].startswith("//"):
                comment.append(lines[j])
                j -= 1
            if length > 80 and "long" not in " ".join(comment).lower():
                print(f"{path}:{start + 1}: {length} lines, no comment above saying why it is long")
            start = None
PY
)
record function_length "$out"

# A reference to the machine this was written on, or to material beside the
# repository, would break on a fresh clone. This script names the patterns, so
# it skips itself.
# The pattern is assembled from pieces so that this file does not itself
# contain the paths it looks for.
w=work s=shared
outside="(/$w/|\\.\\./$s/|$s/(notes|design|research|tools)/)"
out=$(list_files | grep -v '^deploy/check-tree.sh$' | while read -r f; do
    [[ -f $f ]] && grep -Hn -E "$outside" "$f" || true
done)
record self_contained "$out"

failed=0
for o in "${OUTPUTS[@]}"; do [[ -z $o ]] || failed=$((failed + 1)); done

if [[ -n $XML ]]; then
    esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites><testsuite name=\"check-tree\" tests=\"${#NAMES[@]}\" failures=\"$failed\">"
        for i in "${!NAMES[@]}"; do
            echo "<testcase classname=\"check-tree\" name=\"${NAMES[$i]}\">"
            [[ -z ${OUTPUTS[$i]} ]] || echo "<failure message=\"$(head -n 1 <<<"${OUTPUTS[$i]}" | esc)\"/>"
            echo "</testcase>"
        done
        echo "</testsuite></testsuites>"
    } >"$XML"
fi
((failed == 0))
