#!/usr/bin/env bash
# Count the test cases in JUnit-style XML files (gtest --gtest_output=xml and
# Bazel's bazel-testlogs/**/test.xml).
#
# Usage: tests/rxe/xml-count.sh [--list] FILE...
#
# Prints one line "passed=N failed=N skipped=N disabled=N".  With --list, each
# failed, skipped or disabled test case is first printed on its own line as
# "failed|skipped|disabled<TAB>classname.name<TAB>file".
#
# A <testcase> is failed if it has a <failure> or <error> child, disabled if
# status="notrun" (gtest's DISABLED_ tests), skipped if result="skipped" or
# it has a <skipped> child, passed otherwise.  Unreadable files are reported on
# stderr and counted as one failed test case each.  Text inside CDATA sections
# (gtest puts failure messages there) is ignored.
#
# Exit status: 0 (the counts are the result), 2 on bad usage.
set -euo pipefail

LIST=0
case "${1:-}" in
-h | --help)
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit 0
    ;;
--list) LIST=1 && shift ;;
esac

passed=0 failed=0 skipped=0 disabled=0
for f in "$@"; do
    if [[ ! -r $f ]]; then
        echo "xml-count: cannot read $f" >&2
        failed=$((failed + 1))
        ((LIST)) && printf 'failed\t%s\t%s\n' "(unreadable)" "$f"
        continue
    fi
    # One record per "<"; attribute values never contain a raw "<" (it is
    # escaped), CDATA content is skipped explicitly.
    out=$(awk -v RS='<' -v list="$LIST" -v file="$f" '
        function attr(tag, key,    m) {
            # The blank before the key keeps "name" from matching inside "classname".
            if (match(tag, "[ \t\r\n]" key "=\"[^\"]*\"")) return substr(tag, RSTART + length(key) + 3, RLENGTH - length(key) - 4)
            return ""
        }
        function finish(   kind) {
            if (!intc) return
            kind = tc_failed ? "failed" : tc_disabled ? "disabled" : tc_skipped ? "skipped" : "passed"
            count[kind]++
            if (list && kind != "passed") printf "%s\t%s\t%s\n", kind, tc_name, file
            intc = 0
        }
        incdata { if (index($0, "]]>")) incdata = 0; next }
        /^!\[CDATA\[/ { if (!index($0, "]]>")) incdata = 1; next }
        /^testcase[ \t\r\n\/>]/ {
            finish()
            tag = substr($0, 1, index($0, ">"))
            intc = 1; tc_failed = 0; tc_skipped = 0; tc_disabled = 0
            cls = attr(tag, "classname"); tc_name = (cls != "" ? cls "." : "") attr(tag, "name")
            if (attr(tag, "status") == "notrun") tc_disabled = 1
            if (attr(tag, "result") == "skipped") tc_skipped = 1
            if (tag ~ /\/>$/) finish()
            next
        }
        intc && /^(failure|error)[ \t\r\n\/>]/ { tc_failed = 1; next }
        intc && /^skipped[ \t\r\n\/>]/ { tc_skipped = 1; next }
        /^\/testcase>/ { finish(); next }
        END {
            finish()
            printf "COUNTS %d %d %d %d\n", count["passed"], count["failed"], count["skipped"], count["disabled"]
        }' "$f")
    counts=$(grep '^COUNTS ' <<<"$out")
    grep -v '^COUNTS ' <<<"$out" || true
    read -r _ p fl s d <<<"$counts"
    passed=$((passed + p)) failed=$((failed + fl)) skipped=$((skipped + s)) disabled=$((disabled + d))
done
echo "passed=$passed failed=$failed skipped=$skipped disabled=$disabled"
