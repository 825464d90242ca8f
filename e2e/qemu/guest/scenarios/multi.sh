# Several processes under one daemon (issue 17): one fast budget shared between them,
# per-process stats, and a cgroup followed as processes join and leave. Sourced by
# run.sh after lib.sh and tiering.sh (attach_daemon, POLL_S, DEADLINE_S).

# save_target PREFIX: copy start_target's variables to PREFIX_PID, PREFIX_ADDR...
save_target() {
    eval "${1}_PID=$TPID ${1}_ADDR=$TADDR ${1}_LEN=$TLEN ${1}_HOT=$THOT ${1}_OUT=$TOUT"
}

# place_of PREFIX: `place` for a saved target; sets hot hot_n0 ... cold_n1 and PLACE_LINE.
place_of() {
    eval "_line=\$(placement \$${1}_PID \$${1}_ADDR \$${1}_LEN \$${1}_HOT ${2:-})" || return 1
    eval "$_line"
    PLACE_LINE=$_line
}

# stop_saved PREFIX: SIGTERM a saved target and check its checksum line.
stop_saved() {
    eval "TPID=\$${1}_PID TOUT=\$${1}_OUT"
    stop_target
    check $TARGET_SUM_OK "target $1: checksum unchanged ($(tail -n1 "$TOUT"))"
}

# multi-pid: `attach --pid A,B`. A loops over an 8 MiB hot set, B never touches its
# memory again after the fill; both start on node 1 under one 16 MiB budget. A's hot set
# must reach node 0 and B stay on node 1. Then all of B is moved to node 0 behind the
# daemon's back (40 MiB on the fast node against 16): the shared budget must be held by
# demoting B's idle pages, keeping A's hot set where it is.
multi_pid() {
    P=$FAULT_POLICY
    start_target 32 8 1 || return 0
    save_target A
    start_target 32 0 1 || return 0
    save_target B
    TPID="$A_PID,$B_PID"
    attach_daemon "$P" 16 multi-pid
    t0=$(now_ms)
    reached=0
    while [ $(($(now_ms) - t0)) -lt $((DEADLINE_S * 1000)) ]; do
        sleep $POLL_S
        if [ "$(awk '{print $3}' /proc/$DPID/stat 2>/dev/null || echo Z)" = Z ]; then
            daemon_gone_early "$P"
            stop_saved A
            stop_saved B
            return 0
        fi
        place_of A || break
        if [ "$(pct "$hot_n0" "$hot")" -ge 90 ]; then
            reached=1
            break
        fi
    done
    t=$(($(now_ms) - t0))
    [ $reached -eq 1 ]
    check $? "the hot process A: $(pct "$hot_n0" "$hot")% of its hot set on node 0 after $((t / 1000)) s (>= 90% within ${DEADLINE_S} s)"
    place_of B
    b_n0=$((hot_n0 + cold_n0))
    [ "$(pct "$b_n0" $((B_LEN / PAGE)))" -lt 10 ]
    check $? "the idle process B: $b_n0 of its $((B_LEN / PAGE)) pages on node 0 (< 10%)"
    # Pressure: B entirely on node 0, over the shared budget.
    place_of A
    a_before=$hot_n0
    place_of B 0 >/dev/null
    info "moved B to node 0 behind the daemon's back: $PLACE_LINE"
    budget=$((16 * 1024 * 1024 / PAGE))
    t1=$(now_ms)
    held=0
    while [ $(($(now_ms) - t1)) -lt 60000 ]; do
        sleep $POLL_S
        place_of A || break
        a_hot=$hot_n0
        a_n0=$((hot_n0 + cold_n0))
        place_of B || break
        b_n0=$((hot_n0 + cold_n0))
        if [ $((a_n0 + b_n0)) -le $((budget + budget / 20)) ]; then
            held=1
            break
        fi
    done
    t=$(($(now_ms) - t1))
    [ $held -eq 1 ]
    check $? "the shared budget is held again after $((t / 1000)) s: A $a_n0 + B $b_n0 pages on node 0 (budget $budget pages, 5% slack)"
    # A's hot pages on node 0 before the pressure must stay: the daemon tells the
    # policy of B's pages found on node 0 and of its budget demotions (PageMoved), so
    # multiclock's own reclaim takes B's idle pages, not A's (docs/e2e.md).
    place_of A
    [ "$hot_n0" -ge $((a_before * 9 / 10)) ]
    check $? "A keeps its hot set through the pressure: $hot_n0 of the $a_before hot pages it had on node 0 (>= 90%)"
    kill -TERM "$DPID"
    wait_exit "$DPID" 15
    [ $WAIT_RC -eq 0 ]
    check $? "daemon stops cleanly on SIGTERM (exit status $WAIT_RC)"
    # Per-process stats: the summary lists both processes, and A's promotions are its own.
    grep -q "\"pids\": \[" "$DSUM" && tr -d ' \n' <"$DSUM" | grep -q "\"pids\":\[$A_PID,$B_PID\]"
    check $? "summary.json lists both processes (pids [$A_PID,$B_PID])"
    a_prom=$(tr -d ' \n' <"$DSUM" | grep -o "{\"pid\":$A_PID,[^}]*}" | head -n1 | grep -o '"promoted_pages":[0-9]*' | grep -o '[0-9]*$')
    a_dem=$(tr -d ' \n' <"$DSUM" | grep -o "{\"pid\":$A_PID,[^}]*}" | head -n1 | grep -o '"demoted_pages":[0-9]*' | grep -o '[0-9]*$')
    b_dem=$(tr -d ' \n' <"$DSUM" | grep -o "{\"pid\":$B_PID,[^}]*}" | head -n1 | grep -o '"demoted_pages":[0-9]*' | grep -o '[0-9]*$')
    info "per-process counters: A promoted ${a_prom:-?} demoted ${a_dem:-?}, B demoted ${b_dem:-?}"
    [ "${a_prom:-0}" -ge $((A_HOT / PAGE * 9 / 10)) ]
    check $? "per-process stats: A's promotions (${a_prom:-?}) cover its hot set"
    # The budget was taken from the idle process: >= 90% of all demotions are B's.
    [ -n "$b_dem" ] && [ -n "$a_dem" ] && [ "$b_dem" -ge $(((a_dem + b_dem) * 9 / 10)) ]
    check $? "the shared budget was taken from the idle process: B gave ${b_dem:-?} of the $((${a_dem:-0} + ${b_dem:-0})) pages demoted (>= 90%)"
    [ -s "$DERR" ] && show "$DERR" "stderr|"
    stop_saved A
    stop_saved B
}

# multi-cgroup: `attach --cgroup DIR`. A joins before the daemon starts, B after: B's hot
# set must be promoted too (the daemon followed it in). Moving both out and removing the
# cgroup ends the daemon with status 0 and end_reason cgroup-removed.
multi_cgroup() {
    P=$FAULT_POLICY
    CG=/sys/fs/cgroup/tk-multi
    if [ ! -f /sys/fs/cgroup/cgroup.procs ]; then
        fail "cgroup v2 is not mounted at /sys/fs/cgroup"
        return 0
    fi
    rmdir $CG 2>/dev/null
    mkdir $CG || { fail "cannot create $CG"; return 0; }
    start_target 32 8 1 || return 0
    save_target A
    echo "$A_PID" >$CG/cgroup.procs
    DERR=/tmp/multi-cgroup.err
    DSTATS=/tmp/multi-cgroup.jsonl
    DSUM=/tmp/multi-cgroup.summary.json
    echo "    \$ tierkit attach --policy $P --cgroup $CG --fast-node 0 --slow-node 1 --fast-budget 24MiB"
    tierkit attach --policy "$P" --cgroup $CG --fast-node 0 --slow-node 1 --fast-budget 24MiB \
        --stats "$DSTATS" --summary "$DSUM" >/tmp/multi-cgroup.out 2>"$DERR" &
    DPID=$!
    track $DPID
    # wait_hot PREFIX: up to DEADLINE_S for >= 90% of its hot set on node 0; sets T_HOT.
    wait_hot() {
        _t0=$(now_ms)
        while [ $(($(now_ms) - _t0)) -lt $((DEADLINE_S * 1000)) ]; do
            sleep $POLL_S
            place_of "$1" || return 1
            if [ "$(pct "$hot_n0" "$hot")" -ge 90 ]; then
                T_HOT=$(($(now_ms) - _t0))
                return 0
            fi
            kill -0 "$DPID" 2>/dev/null || return 1
        done
        return 1
    }
    wait_hot A
    check $? "member A: $(pct "$hot_n0" "$hot")% of its hot set on node 0 ($hot_n0/$hot)"
    start_target 32 8 1 || return 0
    save_target B
    echo "$B_PID" >$CG/cgroup.procs
    wait_hot B
    check $? "B joined the cgroup later and was followed: $(pct "$hot_n0" "$hot")% of its hot set on node 0 ($hot_n0/$hot, after $((${T_HOT:-0} / 1000)) s)"
    # A leaves: the daemon marks it gone at its next refresh.
    echo "$A_PID" >/sys/fs/cgroup/cgroup.procs
    sleep 3
    tail -n1 "$DSTATS" | grep -q "{\"pid\":$A_PID,[^}]*\"gone\":true"
    check $? "A left the cgroup: the daemon's stats mark it gone"
    echo "$B_PID" >/sys/fs/cgroup/cgroup.procs
    rmdir $CG
    wait_exit "$DPID" 20
    [ $WAIT_RC -eq 0 ] && grep -q '"end_reason": "cgroup-removed"' "$DSUM"
    check $? "removing the cgroup ends the daemon: status $WAIT_RC, $(grep -o '"end_reason": "[a-z-]*"' "$DSUM")"
    [ -s "$DERR" ] && show "$DERR" "stderr|"
    stop_saved A
    stop_saved B
}
