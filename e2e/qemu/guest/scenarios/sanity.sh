# Scenarios that need no tierkit: the guest is the machine the other scenarios assume.

# sanity: two nodes, node 1 CPU-less in a lower memory tier, move_pages(2) from another
# process works both ways (the oracle the tiering scenarios rely on), and the raw
# kernel move_pages throughput as a reference for the daemon's.
sanity() {
    N=/sys/devices/system/node
    info "nodes online=$(cat $N/online) has_cpu=$(cat $N/has_cpu) node1_cpus='$(cat $N/node1/cpulist 2>/dev/null)' distance0='$(cat $N/node0/distance)'"
    [ "$(cat $N/online)" = 0-1 ] && [ -z "$(cat $N/node1/cpulist)" ]
    check $? "two nodes online, node 1 without CPUs"

    tiers=""
    for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
        tiers="$tiers ${t##*/}=$(cat "$t/nodelist")"
    done
    info "memory tiers:$tiers"
    t0=$(grep -l '^0$' /sys/devices/virtual/memory_tiering/memory_tier*/nodelist | head -n1)
    t1=$(grep -l '^1$' /sys/devices/virtual/memory_tiering/memory_tier*/nodelist | head -n1)
    [ -n "$t0" ] && [ -n "$t1" ] && [ "$t0" != "$t1" ]
    check $? "HMAT puts node 0 and node 1 in different memory tiers"

    [ "$(cat /proc/sys/kernel/numa_balancing)" = 0 ]
    check $? "kernel NUMA balancing is off (only the daemon moves pages)"

    info "DAMON sysfs: $([ -d /sys/kernel/mm/damon/admin ] && echo yes || echo no), page_idle: $([ -e /sys/kernel/mm/page_idle/bitmap ] && echo yes || echo no)"

    start_target 64 8 1 || return 0
    place
    [ "$hot_n1" -eq "$hot" ] && [ "$cold_n1" -eq "$cold" ]
    check $? "target's buffer starts entirely on node 1 ($PLACE_LINE)"

    place 0
    info "move_pages node1->node0: $PLACE_LINE"
    [ "$hot_n0" -eq "$hot" ] && [ "$cold_n0" -eq "$cold" ] && [ "$move_errors" -eq 0 ]
    check $? "move_pages moves all $((hot + cold)) pages to node 0 and the query agrees"
    echo "MEASURE raw_move_pages_per_s=$move_pages_per_s dir=1to0 pages=$moved"
    info "raw move_pages throughput 1->0: $move_pages_per_s pages/s ($moved pages in $move_ms ms, batches of 512)"

    place 1
    [ "$hot_n1" -eq "$hot" ] && [ "$cold_n1" -eq "$cold" ] && [ "$move_errors" -eq 0 ]
    check $? "move_pages moves them back to node 1"
    echo "MEASURE raw_move_pages_per_s=$move_pages_per_s dir=0to1 pages=$moved"
    info "raw move_pages throughput 0->1: $move_pages_per_s pages/s ($moved pages in $move_ms ms)"

    stop_target
    check $TARGET_SUM_OK "target's checksum unchanged after two full migrations ($(tail -n1 "$TOUT"))"
}

# sanity-1node: the one-node boot really has one node.
sanity_1node() {
    info "nodes online=$(cat /sys/devices/system/node/online)"
    [ "$(cat /sys/devices/system/node/online)" = 0 ]
    check $? "one NUMA node online"
}
