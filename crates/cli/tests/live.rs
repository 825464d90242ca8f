//! Host-side checks of the live commands (`doctor`, `run`, `attach`): the report,
//! and one-line errors with the contract's exit codes (2 usage / machine, 3 privilege).
//! Two-node behaviour is tested in the QEMU guest (e2e/qemu).

use std::process::{Command, Output};

fn tierkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tierkit"))
}

fn one_line_error(o: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(lines[0].starts_with("tierkit: "), "{err}");
    assert!(lines[0].contains(needle), "`{needle}` not in: {err}");
    assert!(o.stdout.is_empty(), "nothing on stdout");
}

fn doctor_json() -> serde_json::Value {
    let o = tierkit().args(["doctor", "--json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn nodes_with_memory() -> usize {
    doctor_json()["topology"]["nodes"]
        .as_array()
        .map_or(0, |n| {
            n.iter()
                .filter(|x| x["mem_total_kb"].as_u64() > Some(0))
                .count()
        })
}

#[test]
fn doctor_reports_nodes_facilities_and_every_policy() {
    let o = tierkit().arg("doctor").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let t = String::from_utf8(o.stdout).unwrap();
    for s in [
        "NUMA nodes",
        "node0",
        "DAMON sysfs",
        "idle page tracking",
        "perf memory sampling",
        "numa_balancing",
        "privileges",
        "policies live",
    ] {
        assert!(t.contains(s), "`{s}` missing:\n{t}");
    }
    let j = doctor_json();
    let names: Vec<&str> = j["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for n in [
        "first-touch",
        "multiclock",
        "pet",
        "damon-tiering",
        "chrono",
        "memtis",
        "oracle",
    ] {
        assert!(names.contains(&n), "{n}");
    }
    // Never runnable live: the clairvoyant references; always: first-touch.
    let runnable = |n: &str| {
        j["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .unwrap()["runnable"]
            .as_bool()
            .unwrap()
    };
    assert!(!runnable("oracle") && runnable("first-touch"));
    if nodes_with_memory() < 2 {
        assert!(t.contains("only one NUMA node"), "{t}");
    }
}

#[test]
fn nonexistent_pid_is_a_usage_error() {
    let o = tierkit()
        .args(["attach", "--policy", "first-touch", "--pid", "2147483000"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "no process with pid 2147483000");
    let o = tierkit()
        .args(["attach", "--policy", "first-touch", "--pid", "-3"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "not a process id");
    // Several pids: each must be a process; a bad list names the bad part.
    let me = std::process::id().to_string();
    let o = tierkit()
        .args(["attach", "--policy", "first-touch", "--pid"])
        .arg(format!("{me},2147483000"))
        .output()
        .unwrap();
    one_line_error(&o, 2, "no process with pid 2147483000");
    let o = tierkit()
        .args(["attach", "--policy", "first-touch", "--pid", "12,x"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "`x` is not a process id");
    let o = tierkit()
        .args(["attach", "--policy", "first-touch", "--pid", "12,12"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "names pid 12 twice");
}

#[test]
fn a_cgroup_that_is_not_one_is_a_usage_error() {
    let o = tierkit()
        .args([
            "attach",
            "--policy",
            "first-touch",
            "--cgroup",
            "/nonexistent/tk",
        ])
        .output()
        .unwrap();
    one_line_error(&o, 2, "--cgroup /nonexistent/tk: not a cgroup v2 directory");
    // A name is looked up under /sys/fs/cgroup.
    let o = tierkit()
        .args([
            "attach",
            "--policy",
            "first-touch",
            "--cgroup",
            "tierkit-no-such-group",
        ])
        .output()
        .unwrap();
    one_line_error(
        &o,
        2,
        "/sys/fs/cgroup/tierkit-no-such-group: not a cgroup v2",
    );
    // --pid and --cgroup exclude each other; one of them is needed (clap's errors).
    let o = tierkit()
        .args([
            "attach",
            "--policy",
            "first-touch",
            "--pid",
            "1",
            "--cgroup",
            "/x",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = tierkit()
        .args(["attach", "--policy", "first-touch"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pid"));
}

#[test]
#[cfg_attr(
    tierkit_numa,
    ignore = "this machine has two NUMA nodes with memory; the QEMU e2e covers live runs there"
)]
fn one_numa_node_is_a_clear_error() {
    assert!(
        nodes_with_memory() < 2,
        "the NUMA probe of the build was stale"
    );
    let o = tierkit()
        .args(["run", "--policy", "multiclock", "--", "true"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "NUMA node");
    let me = std::process::id().to_string();
    let o = tierkit()
        .args(["attach", "--policy", "first-touch", "--pid", &me])
        .output()
        .unwrap();
    one_line_error(&o, 2, "needs a fast and a slow node");
}

#[test]
fn unknown_policy_bad_size_and_bad_settings_are_usage_errors() {
    let me = std::process::id().to_string();
    let base = ["attach", "--pid", me.as_str()];
    let o = tierkit()
        .args(base)
        .args(["--policy", "nope"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "unknown policy `nope`; valid: ");
    let o = tierkit()
        .args(base)
        .args(["--policy", "pet", "--fast-budget", "12parsecs"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "--fast-budget");
    let o = tierkit()
        .args(base)
        .args(["--policy", "pet", "--set", "live.batch_pages=0"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "live.batch_pages");
    let o = tierkit()
        .args(base)
        .args(["--policy", "pet", "--set", "no_such_knob=1"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "no_such_knob");
    let o = tierkit()
        .args(base)
        .args(["--policy", "pet", "--prometheus", "localhost"])
        .output()
        .unwrap();
    one_line_error(&o, 2, "--prometheus");
    let o = tierkit()
        .args(base)
        .args(["--policy", "pet", "--duration-s", "-1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
#[cfg_attr(
    tierkit_no_setpriv_root,
    ignore = "needs setpriv (util-linux) and root, to drop to nobody without capabilities"
)]
fn unprivileged_doctor_reports_missing_capabilities() {
    let Ok(o) = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_tierkit"))
        .args(["doctor", "--json"])
        .output()
    else {
        panic!("setpriv was found when the tests were built but not now: cargo clean -p tierkit");
    };
    assert!(
        o.status.success(),
        "setpriv failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["privileges"]["uid"], 65534);
    assert_eq!(j["privileges"]["cap_sys_admin"], false);
    assert_eq!(
        j["pagemap_pfns"], false,
        "PFNs are hidden without CAP_SYS_ADMIN"
    );
}
