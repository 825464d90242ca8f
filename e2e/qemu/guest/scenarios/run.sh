# Runs one scenario by name: sh /scenarios/run.sh NAME. See docs/e2e.md for the list.
. /scenarios/lib.sh
. /scenarios/sanity.sh
. /scenarios/tiering.sh
. /scenarios/faults.sh
. /scenarios/multi.sh
SCENARIO=$1
FAULT_POLICY=$(sed -n 's/.*tk\.fault_policy=\([^ ]*\).*/\1/p' /proc/cmdline)
: "${FAULT_POLICY:=multiclock}"

case $1 in
sanity) sanity ;;
sanity-1node) sanity_1node ;;
doctor) doctor ;;
control-nb) control_nb ;;
promote-*) promote "${1#promote-}" ;;
demote-*) demote "${1#demote-}" ;;
measure-*) measure "${1#measure-}" ;;
fault-target-exit) fault_target_exit ;;
fault-daemon-kill) fault_daemon_kill ;;
fault-bad-pid) fault_bad_pid ;;
fault-unprivileged) fault_unprivileged ;;
fault-single-node) fault_single_node ;;
fault-run-status) fault_run_status ;;
fault-damon-busy) fault_damon_busy ;;
fault-pinned) fault_pinned ;;
fault-fast-full) fault_fast_full ;;
multi-pid) multi_pid ;;
multi-cgroup) multi_cgroup ;;
*) fail "unknown scenario '$1'" ;;
esac
exit 0
