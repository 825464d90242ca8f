# Fault scenarios: the daemon must never harm the target and must fail clearly.
# Policy used: FAULT_POLICY (multiclock unless tk.fault_policy= says otherwise).

# A migration to interrupt: a 64 MiB buffer (16384 pages) on node 0 and an 8 MiB budget,
# so the daemon has ~14300 pages to demote, under a rate cap of 2048 pages/s
# (--set live.rate_pages_per_s, one of the daemon's bounded knobs): about 7 s of
# migration in batches, a wide window for the kill to land mid-migration. (Without the
# cap the daemon moves ~10000 pages/s under TCG and the window would be ~1.5 s.)
BIG_MIB=64
BIG_BUDGET_MIB=8
FAULT_RATE=2048

# daemon_diag: for the developer, when the daemon hangs: its last stats line, stderr,
# state, CPU ticks and every thread's kernel stack (not used to judge).
daemon_diag() {
    tail -n1 "$DSTATS" >/tmp/last-stats 2>/dev/null && show /tmp/last-stats "stats|"
    show "$DERR" "stderr|"
    info "daemon state=$(awk '{print $3}' /proc/$DPID/stat 2>/dev/null) cpu_ticks=$(cpu_ticks $DPID) wchan=$(cat /proc/$DPID/wchan 2>/dev/null)"
    for _t in /proc/$DPID/task/*; do
        [ -d "$_t" ] || continue
        echo "    task ${_t##*/} $(cat $_t/comm) state $(awk '{print $3}' $_t/stat) ticks $(awk '{print $14 + $15}' $_t/stat):"
        show $_t/stack "  stack|"
    done
}

# start_big_demotion NAME: target + daemon; waits (60 s) until the daemon has moved some
# pages but not all (placement query). Returns 1 (after a FAIL) otherwise.
start_big_demotion() {
    start_target $BIG_MIB 8 0 || return 1
    _t0=$(now_ms)
    attach_daemon "$FAULT_POLICY" $BIG_BUDGET_MIB "$1" --set live.rate_pages_per_s=$FAULT_RATE
    _deadline=$(($(now_ms) + 60000))
    while [ "$(now_ms)" -lt $_deadline ]; do
        if [ "$(awk '{print $3}' /proc/$DPID/stat 2>/dev/null || echo Z)" = Z ]; then
            daemon_gone_early "$FAULT_POLICY"
            return 1
        fi
        place || return 1
        if [ $((hot_n1 + cold_n1)) -gt 0 ]; then
            info "migration in progress: $((hot_n1 + cold_n1)) of $((hot + cold)) pages on node 1, $(($(now_ms) - _t0)) ms after attach"
            return 0
        fi
        sleep 0.1
    done
    fail "the daemon moved nothing within 60 s ($PLACE_LINE)"
    daemon_diag
    return 1
}

# fault-target-exit: the target dies (SIGKILL) while pages are being demoted; the daemon
# notices, stops cleanly with status 0, and says at most one line.
fault_target_exit() {
    start_big_demotion fault-target-exit || return 0
    kill -9 "$TPID"
    wait_exit "$DPID" 20
    [ "$WAIT_RC" -eq 124 ] && daemon_diag
    [ "$WAIT_RC" -eq 0 ]
    check $? "daemon exits with status 0 within 20 s after the target died mid-migration (got $WAIT_RC)"
    n=$(grep -c . "$DERR")
    [ "$n" -le 1 ]
    check $? "daemon printed at most one line on stderr ($n): $(head -n1 "$DERR")"
    [ "$n" -gt 1 ] && show "$DERR" "stderr|"
    n=$(grep -c . /tmp/fault-target-exit.out)
    [ "$n" -eq 0 ]
    check $? "daemon printed nothing on stdout ($n lines)"
    damon_reset
}

# fault-daemon-kill: SIGKILL the daemon mid-batch; the target runs on, its memory intact,
# and its pages stay where they were.
fault_daemon_kill() {
    start_big_demotion fault-daemon-kill || return 0
    kill -9 "$DPID"
    wait "$DPID" 2>/dev/null
    sleep 1
    place
    before=$PLACE_LINE
    sleep 4
    place
    [ "$PLACE_LINE" = "$before" ]
    check $? "placement unchanged after the daemon died ($PLACE_LINE)"
    kill -0 "$TPID"
    check $? "target still running after SIGKILL of the daemon"
    : >"$TOUT"
    kill -USR1 "$TPID"
    _deadline=$(($(now_ms) + 20000))
    while ! grep -q checksum "$TOUT" && [ "$(now_ms)" -lt $_deadline ]; do sleep 0.2; done
    grep -q "checksum ok" "$TOUT"
    check $? "target's checksum unchanged while it runs on ($(cat "$TOUT"))"
    kill -0 "$TPID"
    check $? "target still running after the check"
    # A SIGKILLed daemon cannot stop the kdamond it started; the next daemon must
    # recognise it as tierkit's (registry /run/tierkit) and take it back.
    k=/sys/kernel/mm/damon/admin/kdamonds
    info "kdamonds left behind by the killed daemon: $(cat $k/nr_kdamonds 2>/dev/null || echo n/a), kdamond 0 $(cat $k/0/state 2>/dev/null), registry: $(cat /run/tierkit/kdamond-0 2>/dev/null)"
    tierkit attach --policy "$FAULT_POLICY" --pid "$TPID" --fast-node 0 --slow-node 1 \
        --duration-s 8 >/tmp/reclaim.out 2>/tmp/reclaim.err
    rc=$?
    [ $rc -eq 0 ] && grep -q 'stopped (duration)' /tmp/reclaim.err
    check $? "a new daemon takes back the killed daemon's kdamond and runs (status $rc): $(head -n1 /tmp/reclaim.err)"
    [ "$(cat $k/nr_kdamonds)" = 1 ] && [ "$(cat $k/0/state)" = off ] && [ ! -e /run/tierkit/kdamond-0 ]
    check $? "after it, no kdamond was added and its own is off and given back (nr_kdamonds $(cat $k/nr_kdamonds), state $(cat $k/0/state))"
    damon_reset
    stop_target
    check $TARGET_SUM_OK "target exits normally with its checksum unchanged"
}

# fault-bad-pid: a pid that does not exist.
fault_bad_pid() {
    pid=99999
    while kill -0 $pid 2>/dev/null; do pid=$((pid + 1)); done
    tierkit attach --policy "$FAULT_POLICY" --pid $pid >/tmp/badpid.out 2>/tmp/badpid.err
    rc=$?
    [ $rc -ne 0 ] && [ $rc -eq 2 ]
    check $? "attach to nonexistent pid $pid exits with status 2 (got $rc)"
    one_line_error /tmp/badpid.err
    check $? "one-line error: $(head -n1 /tmp/badpid.err)"
    [ "$(grep -c . /tmp/badpid.err)" -gt 1 ] && show /tmp/badpid.err "stderr|"
}

# fault-unprivileged: uid 65534 without capabilities, against a root target (needs
# CAP_SYS_NICE to move another user's pages) and with `run` on its own child (a DAMON
# policy still needs root or CAP_DAC_OVERRIDE for DAMON sysfs, root's files of mode 0600).
fault_unprivileged() {
    start_target 16 4 0 || return 0
    asuser 65534 tierkit attach --policy "$FAULT_POLICY" --pid "$TPID" \
        >/tmp/unpriv.out 2>/tmp/unpriv.err
    rc=$?
    [ $rc -eq 3 ]
    check $? "unprivileged attach to a root process exits with status 3 (got $rc)"
    one_line_error /tmp/unpriv.err && grep -q 'CAP_' /tmp/unpriv.err
    check $? "one-line error naming the capability: $(head -n1 /tmp/unpriv.err)"
    [ "$(grep -c . /tmp/unpriv.err)" -gt 1 ] && show /tmp/unpriv.err "stderr|"
    stop_target

    asuser 65534 tierkit run --policy damon-tiering --duration-s 5 -- hotset 16 4 0 /tmp/unpriv-run.info 3 \
        >/tmp/unpriv-run.out 2>/tmp/unpriv-run.err
    rc=$?
    [ $rc -eq 3 ]
    check $? "unprivileged run with a DAMON policy exits with status 3 (got $rc)"
    one_line_error /tmp/unpriv-run.err && grep -q 'CAP_DAC_OVERRIDE' /tmp/unpriv-run.err
    check $? "one-line error naming CAP_DAC_OVERRIDE: $(head -n1 /tmp/unpriv-run.err)"
    [ "$(grep -c . /tmp/unpriv-run.err)" -gt 1 ] && show /tmp/unpriv-run.err "stderr|"
}

# fault-single-node (one-node boot): attach and run fail clearly; doctor still works.
fault_single_node() {
    start_target 16 4 0 || return 0
    tierkit attach --policy "$FAULT_POLICY" --pid "$TPID" >/tmp/one.out 2>/tmp/one.err
    rc=$?
    [ $rc -eq 2 ]
    check $? "attach on a one-node machine exits with status 2 (got $rc)"
    one_line_error /tmp/one.err && grep -qi 'node' /tmp/one.err
    check $? "one-line error about the nodes: $(head -n1 /tmp/one.err)"
    stop_target
    tierkit run --policy "$FAULT_POLICY" -- true >/tmp/one-run.out 2>/tmp/one-run.err
    rc=$?
    [ $rc -eq 2 ] && one_line_error /tmp/one-run.err
    check $? "run on a one-node machine: status 2 (got $rc) and one line: $(head -n1 /tmp/one-run.err)"
    tierkit doctor >/tmp/one-doctor.out 2>&1
    rc=$?
    [ $rc -eq 0 ]
    check $? "doctor still works on a one-node machine (status $rc)"
    show /tmp/one-doctor.out "doctor|"
}

# doctor: exit 0 and a report that sees both nodes and DAMON.
doctor() {
    tierkit doctor >/tmp/doctor.out 2>&1
    rc=$?
    [ $rc -eq 0 ]
    check $? "tierkit doctor exits 0"
    show /tmp/doctor.out "doctor|"
    grep -qi damon /tmp/doctor.out
    check $? "doctor reports DAMON"
}

# fault-run-status: `tierkit run` is a wrapper. It exits with its command's status,
# passes SIGTERM on to the command and waits for it, and says what happened to it.
# first-touch needs no DAMON, so the checks are about the wrapper alone.
fault_run_status() {
    tierkit run --policy first-touch -- false >/tmp/run-false.out 2>/tmp/run-false.err
    rc=$?
    [ $rc -eq 1 ]
    check $? "run -- false exits with status 1 (got $rc)"
    tierkit run --policy first-touch -- sh -c 'exit 3' >/tmp/run-3.out 2>/tmp/run-3.err
    rc=$?
    [ $rc -eq 3 ] && grep -q 'exited with status 3' /tmp/run-3.err
    check $? "run -- sh -c 'exit 3' exits with status 3 and says so (got $rc): $(tail -n1 /tmp/run-3.err)"
    rm -f /tmp/run-term.flag
    tierkit run --policy first-touch -- sh -c \
        'trap "echo term >/tmp/run-term.flag; exit 7" TERM; while :; do sleep 0.1; done' \
        >/tmp/run-term.out 2>/tmp/run-term.err &
    _rp=$!
    sleep 2
    kill -TERM $_rp
    wait_exit $_rp 20
    [ "$WAIT_RC" -eq 7 ] && [ -f /tmp/run-term.flag ]
    check $? "SIGTERM to tierkit reaches the command, and tierkit exits with its status 7 (got $WAIT_RC, flag $([ -f /tmp/run-term.flag ] && echo set || echo missing))"
    grep -q 'passed signal 15 on to' /tmp/run-term.err
    check $? "tierkit says it passed the signal on: $(grep -m1 'signal' /tmp/run-term.err)"
    [ "$WAIT_RC" -eq 124 ] && { kill -9 $_rp 2>/dev/null; show /tmp/run-term.err "stderr|"; }
}

# fault-damon-busy: another tool's kdamond (here one monitoring the same target) is on.
# The kernel adds no kdamond while one runs, so a DAMON policy cannot start: one line,
# status 2, and the other tool's kdamond is left exactly as it was.
fault_damon_busy() {
    start_target 16 4 0 || return 0
    k=/sys/kernel/mm/damon/admin/kdamonds
    damon_reset
    echo 1 >$k/nr_kdamonds && echo 1 >$k/0/contexts/nr_contexts &&
        echo vaddr >$k/0/contexts/0/operations &&
        echo 1 >$k/0/contexts/0/targets/nr_targets &&
        echo "$TPID" >$k/0/contexts/0/targets/0/pid_target && echo on >$k/0/state
    if [ "$(cat $k/0/state)" != on ]; then
        fail "could not start the other tool's kdamond (vaddr on pid $TPID)"
        damon_reset
        stop_target
        return 0
    fi
    tierkit attach --policy damon-tiering --pid "$TPID" --fast-node 0 --slow-node 1 \
        --duration-s 5 >/tmp/busy.out 2>/tmp/busy.err
    rc=$?
    [ $rc -eq 2 ] && one_line_error /tmp/busy.err && grep -q 'another tool' /tmp/busy.err
    check $? "attach while another tool's kdamond runs: status 2 (got $rc), one line: $(head -n1 /tmp/busy.err)"
    [ "$(cat $k/0/state)" = on ] && [ "$(cat $k/nr_kdamonds)" = 1 ] &&
        [ "$(cat $k/0/contexts/0/targets/0/pid_target)" = "$TPID" ]
    check $? "the other tool's kdamond is untouched (state $(cat $k/0/state), nr_kdamonds $(cat $k/nr_kdamonds))"
    damon_reset
    stop_target
}

# fault-pinned: the first 8 pages of the hot set are pinned (hotset's HOTSET_PIN_PAGES:
# vmsplice into a pipe never read) and everything starts on node 1. The kernel cannot
# move a pinned page: move_pages returns how many pages it could not move and leaves the
# status words of that batch unwritten. The daemon must count as promoted exactly the
# pages that reached node 0 (issue 17: status words started at 0, a node id, so a
# failed batch read as promoted), and the pinned pages stay on node 1.
fault_pinned() {
    export HOTSET_PIN_PAGES=8
    start_target $SIZE_MIB $HOT_MIB 1
    _ok=$?
    unset HOTSET_PIN_PAGES
    [ $_ok -eq 0 ] || return 0
    # The daemon counts every page of the target it promotes, not only the buffer's: a
    # page of hotset's heap or stack that the fill's node-1 binding placed there may
    # move too. So the oracle is all of its anonymous memory on node 0, before and after.
    anon_before=$(anon_n0 "$TPID")
    attach_daemon multiclock $BUDGET_MIB fault-pinned
    t0=$(now_ms)
    while [ $(($(now_ms) - t0)) -lt 120000 ]; do
        sleep 2
        place || break
        [ "$(pct "$hot_n0" "$hot")" -ge 90 ] && break
    done
    sleep 3
    kill -TERM "$DPID"
    wait_exit "$DPID" 15
    place
    anon_after=$(anon_n0 "$TPID")
    moved=$((anon_after - anon_before))
    # The daemon's counters are in summary.json's `last` object, after the policy's
    # own statistics (which have a `promoted_pages` of their own: the policy's
    # requests), so the last occurrence is the daemon's.
    promoted=$(grep -o '"promoted_pages": [0-9]*' "$DSUM" | tail -n1 | grep -o '[0-9]*$')
    demoted=$(grep -o '"demoted_pages": [0-9]*' "$DSUM" | tail -n1 | grep -o '[0-9]*$')
    failures=$(grep -o '"migrate_failures": [0-9]*' "$DSUM" | tail -n1 | grep -o '[0-9]*$')
    info "placement $PLACE_LINE; anonymous pages on node 0: $anon_before before, $anon_after after; daemon: promoted ${promoted:-?}, demoted ${demoted:-?}, failures ${failures:-?}"
    [ "$(pct "$hot_n0" "$hot")" -ge 90 ]
    check $? "the unpinned hot set was promoted ($hot_n0/$hot pages on node 0)"
    [ -n "$promoted" ] && [ -n "$demoted" ] && [ $((promoted - demoted)) -eq "$moved" ]
    check $? "the daemon's promoted minus demoted pages ($promoted - ${demoted:-?}) are the target's anonymous pages that reached node 0 ($moved)"
    [ "$hot_n1" -ge 8 ] && [ "${failures:-0}" -ge 8 ]
    check $? "the 8 pinned pages stayed on node 1 ($hot_n1 hot pages there) and count as failed moves ($failures)"
    stop_target
}

# fault-fast-full: another process fills the fast node as far as the kernel lets it
# (MPOL_PREFERRED: the overflow lands on node 1, no OOM kill), leaving less free than the
# target's 64 MiB hot set (the kernel lets about 28 MiB of it in). The daemon must not end (the kernel answers its moves with
# ENOMEM, whole calls or pages: counted, backed off from and retried, issue 17 point 3);
# once the other process exits, the hot set must follow.
fault_fast_full() {
    start_target 80 64 1 || return 0
    save_target T
    free_kb=$(awk '/MemFree/ {print $4}' /sys/devices/system/node/node0/meminfo)
    fill_mib=$(((free_kb / 1024) + 64))
    export HOTSET_PREFERRED=1
    start_target $fill_mib 0 0
    _ok=$?
    unset HOTSET_PREFERRED
    [ $_ok -eq 0 ] || return 0
    save_target F
    info "filler: $fill_mib MiB on node 0; node 0 now: $(grep MemFree /sys/devices/system/node/node0/meminfo | tr -s ' ')"
    TPID=$T_PID TADDR=$T_ADDR TLEN=$T_LEN THOT=$T_HOT TOUT=$T_OUT
    attach_daemon multiclock 1024 fault-fast-full
    # Promotion into the room left, until it stops growing (3 polls, after 30 s of
    # warm-up and policy periods) or 70 s.
    t0=$(now_ms)
    last=-1
    same=0
    while [ $(($(now_ms) - t0)) -lt 70000 ] && [ $same -lt 3 ]; do
        sleep 2
        place || break
        if [ "$hot_n0" -eq "$last" ] && [ $(($(now_ms) - t0)) -ge 30000 ]; then
            same=$((same + 1))
        else
            same=0
        fi
        last=$hot_n0
        kill -0 "$DPID" 2>/dev/null || break
    done
    alive=0
    kill -0 "$DPID" 2>/dev/null && [ "$(awk '{print $3}' /proc/$DPID/stat 2>/dev/null)" != Z ] && alive=1
    [ $alive -eq 1 ]
    check $? "with the fast node full the daemon keeps running after $((($(now_ms) - t0) / 1000)) s (hot set $(pct "$hot_n0" "$hot")% on node 0, $hot_n0/$hot; node 0 $(grep MemFree /sys/devices/system/node/node0/meminfo | tr -s ' ' | cut -d' ' -f4-5))"
    [ -s "$DSTATS" ] && info "daemon: $(tail -n1 "$DSTATS" | grep -o '"\(refused_migrations\|fail_nomem\|move_call_failures\|promoted_pages\)":[0-9]*' | tr '\n' ' ')"
    [ $alive -eq 1 ] || { show "$DERR" "stderr|"; stop_saved F; stop_saved T; return 0; }
    [ "$(pct "$hot_n0" "$hot")" -lt 90 ]
    check $? "the full node limited promotion ($(pct "$hot_n0" "$hot")% of the hot set < 90%): the scenario tests what it says"
    stop_saved F
    TPID=$T_PID TADDR=$T_ADDR TLEN=$T_LEN THOT=$T_HOT TOUT=$T_OUT
    t0=$(now_ms)
    while [ $(($(now_ms) - t0)) -lt 90000 ]; do
        sleep 2
        place || break
        [ "$(pct "$hot_n0" "$hot")" -ge 90 ] && break
    done
    [ "$(pct "$hot_n0" "$hot")" -ge 90 ]
    check $? "after the other process exits the hot set follows: $(pct "$hot_n0" "$hot")% on node 0 ($hot_n0/$hot) after $((($(now_ms) - t0) / 1000)) s"
    kill -TERM "$DPID"
    wait_exit "$DPID" 15
    [ $WAIT_RC -eq 0 ]
    check $? "daemon stops cleanly (status $WAIT_RC)"
    [ -s "$DERR" ] && show "$DERR" "stderr|"
    stop_saved T
}
