# shellcheck shell=bash
# Test-case bookkeeping for the compose shell tests, sourced (bash):
# record/check collect cases, write_xml writes them as JUnit XML for
# deploy/test.sh's counter (tests/rxe/xml-count.sh).
#
#   record NAME pass|fail|skip MESSAGE
#   check NAME WHY COMMAND...   runs COMMAND with its output in $LOG and
#                               printed as it comes (each line with the
#                               time); pass when it exits 0, the message
#                               is its last line; returns COMMAND's verdict
#   write_xml SUITE FILE
# Case times are seconds since the previous case ended.

NAMES=() RESULTS_=() MESSAGES=() TIMES=()
T_CASE=$SECONDS
LOG=${LOG:-$(mktemp "${TMPDIR:-/tmp}/kvcase.XXXXXX")}

record() {
    NAMES+=("$1") RESULTS_+=("$2") MESSAGES+=("$3") TIMES+=("$((SECONDS - T_CASE))")
    printf '    %-4s %-16s %s (%d s)\n' "$2" "$1" "$3" "$((SECONDS - T_CASE))"
    T_CASE=$SECONDS
}

check() {
    local name=$1 why=$2 rc
    shift 2
    TZ=UTC printf -- '--- %s (%(%T)T)\n' "$name" -1
    # Streamed as it comes, each line stamped, so that a slow case (the
    # emulated VM) shows where it is instead of nothing until its end.  The
    # command runs in the pipeline's subshell: what a case must hand to a
    # later one goes through a file, not a variable.
    "$@" 2>&1 | stamp
    rc=${PIPESTATUS[0]}
    if ((rc == 0)); then
        record "$name" pass "$(tail -n 1 "$LOG")"
        return 0
    fi
    record "$name" fail "$why: $(tail -n 1 "$LOG")"
    return 1
}

# stamp: stdin to $LOG as it is, and to stdout with the time of day (UTC)
# and the seconds since the case began.
stamp() {
    local line t0=$SECONDS
    : >"$LOG"
    while IFS= read -r line || [[ -n $line ]]; do
        printf '%s\n' "$line" >>"$LOG"
        # printf's own clock: forking date costs ~1 s a line in the VM
        TZ=UTC printf '  %(%T)T +%ds | %s\n' -1 "$((SECONDS - t0))" "$line"
    done
}

write_xml() {
    local suite=$1 file=$2 i failed=0 skipped=0
    [[ -n $file ]] || return 0
    esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' | tr -d '\000-\010\013\014\016-\037'; }
    for i in "${!NAMES[@]}"; do
        [[ ${RESULTS_[$i]} == fail ]] && failed=$((failed + 1))
        [[ ${RESULTS_[$i]} == skip ]] && skipped=$((skipped + 1))
    done
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites><testsuite name=\"$suite\" tests=\"${#NAMES[@]}\" failures=\"$failed\" skipped=\"$skipped\">"
        for i in "${!NAMES[@]}"; do
            echo "<testcase classname=\"$suite\" name=\"${NAMES[$i]}\" time=\"${TIMES[$i]}\">"
            case ${RESULTS_[$i]} in
            fail) echo "<failure message=\"$(esc <<<"${MESSAGES[$i]}")\"/>" ;;
            skip) echo "<skipped message=\"$(esc <<<"${MESSAGES[$i]}")\"/>" ;;
            esac
            echo "</testcase>"
        done
        echo "</testsuite></testsuites>"
    } >"$file.tmp" && mv -f "$file.tmp" "$file"
}
