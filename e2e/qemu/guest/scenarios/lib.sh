# Shared helpers of the guest scenarios (busybox sh). Sourced by every scenario script.
#
# Output protocol (the host runner greps these): lines starting with PASS, FAIL, SKIP or
# INFO. Every PASS/FAIL is also appended to /tmp/results so /init can print the final
# "N passed, M failed" line however a scenario ended (timeout included).

RESULTS=/tmp/results
PAGE=4096

pass() { echo "PASS $SCENARIO: $*"; echo P >>"$RESULTS"; }
fail() { echo "FAIL $SCENARIO: $*"; echo F >>"$RESULTS"; }
skip() { echo "SKIP $SCENARIO: $*"; }
info() { echo "INFO $SCENARIO: $*"; }
# check COND_EXIT_STATUS DESCRIPTION: pass if the previous command succeeded.
check() { if [ "$1" -eq 0 ]; then pass "$2"; else fail "$2"; fi; }

# Monotonic-enough wall clock in milliseconds (guest uptime).
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# Processes a scenario started; /init kills what is left after each scenario.
track() { echo "$1" >>/tmp/pids; }

# start_target SIZE_MIB HOT_MIB NODE [DURATION_S]
# Starts hotset in the background and waits (30 s deadline) for its info file. Sets
# TPID TADDR TLEN THOT and TOUT (its stdout file). Returns 1 on timeout.
start_target() {
    _n=$(($(cat /tmp/target_seq 2>/dev/null || echo 0) + 1))
    echo $_n >/tmp/target_seq
    _info=/tmp/hotset.$_n.info
    TOUT=/tmp/hotset.$_n.out
    rm -f "$_info"
    hotset "$1" "$2" "$3" "$_info" ${4:-} >"$TOUT" 2>&1 &
    _pid=$!
    track $_pid
    _deadline=$(($(now_ms) + 60000))
    while [ ! -s "$_info" ]; do
        if ! kill -0 $_pid 2>/dev/null || [ "$(now_ms)" -gt $_deadline ]; then
            fail "target hotset $* did not start: $(cat "$TOUT")"
            return 1
        fi
        sleep 0.2
    done
    read TPID TADDR TLEN THOT <"$_info"
    return 0
}

# place: query the target's placement; sets hot hot_n0 hot_n1 hot_other cold cold_n0 ...
# (see guest/placement.c). Optional argument: a node to move the whole buffer to first.
place() {
    _line=$(placement "$TPID" "$TADDR" "$TLEN" "$THOT" ${1:-}) || return 1
    eval "$_line"
    PLACE_LINE=$_line
}

# anon_n0 PID: pages of PID's private anonymous mappings on node 0 — the memory the
# daemon tiers (procfs::anon_ranges: private, readable or writable, no inode, no name or
# [heap] or [anon:...]), queried with `placement` range by range.
anon_n0() {
    _sum=0
    while read -r _range _perms _off _dev _inode _path; do
        case "$_perms" in ???p) ;; *) continue ;; esac
        case "$_perms" in r* | ?w*) ;; *) continue ;; esac
        [ "$_inode" = 0 ] || continue
        case "$_path" in "" | "[heap]" | "[anon:"*) ;; *) continue ;; esac
        _s=${_range%-*}
        _e=${_range#*-}
        _l=$(placement "$1" "$_s" $((0x$_e - 0x$_s)) 0) || continue
        _sum=$((_sum + $(echo "$_l" | sed 's/.*cold_n0=\([0-9]*\).*/\1/')))
    done <"/proc/$1/maps"
    echo "$_sum"
}

# pct PART WHOLE: integer percentage (0 when WHOLE is 0).
pct() { if [ "$2" -gt 0 ]; then echo $((100 * $1 / $2)); else echo 0; fi; }

# cpu_ticks PID: utime + stime of PID in clock ticks (USER_HZ = 100 on x86-64), or empty.
cpu_ticks() {
    [ -r /proc/$1/stat ] || return 1
    # Field 2 (comm) is parenthesised and has no spaces for tierkit; fields 14, 15.
    awk '{ print $14 + $15 }' /proc/$1/stat 2>/dev/null
}

# stop_target: SIGTERM the target, wait (20 s) for its checksum line; sets TARGET_SUM_OK.
stop_target() {
    TARGET_SUM_OK=1
    kill -TERM "$TPID" 2>/dev/null
    _deadline=$(($(now_ms) + 20000))
    while kill -0 "$TPID" 2>/dev/null && [ "$(now_ms)" -lt $_deadline ]; do sleep 0.2; done
    if grep -q "checksum ok" "$TOUT"; then TARGET_SUM_OK=0; fi
}

# wait_exit PID SECONDS: wait for a background child to exit; sets WAIT_RC (its exit
# status, or 124 when it did not exit in time).
wait_exit() {
    _deadline=$(($(now_ms) + $2 * 1000))
    while kill -0 "$1" 2>/dev/null; do
        # A zombie child still answers kill -0; /proc/PID/stat state Z means it exited.
        if [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" = Z ]; then break; fi
        if [ "$(now_ms)" -gt $_deadline ]; then
            WAIT_RC=124
            return 1
        fi
        sleep 0.2
    done
    wait "$1"
    WAIT_RC=$?
    return 0
}

# one_line_error FILE: FILE holds exactly one non-empty line starting "tierkit: ".
one_line_error() {
    [ "$(grep -c . "$1")" -eq 1 ] && head -n1 "$1" | grep -q '^tierkit: '
}

# damon_reset: turn off and remove kdamonds a killed daemon left behind (a SIGKILLed
# process cannot clean up; the next daemon needs nr_kdamonds writable).
damon_reset() {
    _k=/sys/kernel/mm/damon/admin/kdamonds
    [ -d $_k ] || return 0
    for _d in $_k/[0-9]*; do
        [ -d "$_d" ] && [ "$(cat "$_d/state")" = on ] && echo off >"$_d/state" 2>/dev/null
    done
    echo 0 >$_k/nr_kdamonds 2>/dev/null
    return 0
}

# show FILE [PREFIX]: copy a file into the log, indented, for the developer reading it.
show() { sed "s/^/    ${2:-|} /" "$1" 2>/dev/null | head -n 40; }
