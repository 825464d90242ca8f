//! Registered policies driven through `LiveMechanisms` with synthetic DAMON snapshots
//! (a hot first eighth, an idle rest) over a real mapping of the test process. The
//! process's own node plays the slow tier and a node that does not exist the fast
//! one, in dry-run mode, so nothing moves; decisions are read from the cache.

use tierkit_core::*;
use tierkit_live::access::Snapshot;
use tierkit_live::mechanisms::{LiveMechanisms, TierSetup};
use tierkit_live::mover::MoverLimits;
use tierkit_live::sys::damon::Region;

const MS: u64 = 1_000_000;

/// Run `policy` for `secs` simulated seconds over `pages` pages, the first `hot`
/// accessed in every DAMON sample; returns (fast pages among the hot, among the cold).
fn drive(policy: &str, sets: &[String], pages: u64, hot: u64, secs: u64) -> (u64, u64) {
    let d = drive_with(policy, sets, pages, hot, secs, false);
    (d.hot_fast, d.cold_fast)
}

/// What [`drive_with`] saw.
struct Driven {
    hot_fast: u64,
    cold_fast: u64,
    /// The most fast pages the placement cache held at any step.
    max_fast: u64,
    /// The fast tier's capacity (the budget).
    budget: u64,
    /// Steps at which the cache's fast count differed from a walk of the pages.
    count_mismatches: u64,
    /// `PageMoved` events handed to the policy.
    moved_events: u64,
}

/// [`drive`], optionally (`daemon_refresh`) doing once a second what the daemon's
/// refresh does — a placement query, whose pages found elsewhere than decided (the
/// dry run moves nothing) become `PageMoved` events, then `LowWatermark` if the fast
/// tier is short — and checking the cache at every step.
fn drive_with(
    policy: &str,
    sets: &[String],
    pages: u64,
    hot: u64,
    secs: u64,
    daemon_refresh: bool,
) -> Driven {
    let len = (pages * PAGE_SIZE) as usize;
    // SAFETY: a private anonymous mapping of the test, touched below, unmapped at the end.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    for i in 0..pages as usize {
        // SAFETY: inside the mapping.
        unsafe { *(p as *mut u8).add(i * PAGE_SIZE as usize) = 1 };
    }
    let v = p as u64 >> PAGE_SHIFT;
    let info = |id: u8, cap: u64| TierInfo {
        id: TierId(id),
        name: format!("t{id}"),
        capacity_pages: cap,
        load_ns: 100.0,
        store_ns: 100.0,
        bandwidth_bytes_per_s: 1e10,
    };
    let budget = pages * 3 / 8;
    let wm = Watermarks::pages(1, 2, 3);
    let setup = TierSetup {
        nodes: [4000, 0],
        tiers: vec![info(0, budget), info(1, 1 << 20)],
        budget_pages: Some(budget),
        watermarks: [wm, wm],
    };
    let limits = MoverLimits {
        batch_pages: 512,
        rate_pages_per_s: 25_600,
        max_queue_pages: 1 << 20,
    };
    let mut m = LiveMechanisms::new(setup, limits, 1, true);
    let me = m.add_process(std::process::id() as i32);
    m.set_node_free([1 << 20, 1 << 20]);
    let (pc, _) = tierkit_live::config::build(policy, sets, None).unwrap();
    let mut pol = pc.build(&BuildContext::default());
    let wants_moves = pol.requirements().page_alloc_events;
    let mut moved_events = 0;
    let r = m
        .refresh_placement(me, &[(p as u64, p as u64 + len as u64)])
        .unwrap();
    m.set_time(Some(0));
    pol.init(&mut m);
    for (s, n) in r.mmaps {
        let vma = Vma {
            start_vpn: s,
            nr_pages: n,
            kind: VmaKind::Anon,
        };
        pol.on_event(&Event::Mmap { pid: Pid(0), vma }, &mut m);
    }
    for (vpn, tier) in r.allocs {
        pol.on_event(
            &Event::PageAlloc {
                pid: Pid(0),
                vpn,
                tier,
                huge: false,
            },
            &mut m,
        );
    }
    let regions = [
        Region {
            start: v << PAGE_SHIFT,
            end: (v + hot) << PAGE_SHIFT,
            nr_accesses: 40,
            age: 1,
        },
        Region {
            start: (v + hot) << PAGE_SHIFT,
            end: (v + pages) << PAGE_SHIFT,
            nr_accesses: 0,
            age: 1,
        },
    ];
    let (mut max_fast, mut count_mismatches) = (0, 0);
    let mut t = 0;
    while t < secs * 1000 * MS {
        t += 5 * MS;
        while let Some((at, id)) = m.pop_due_timer(t) {
            m.set_time(Some(at));
            pol.on_event(&Event::Timer { id }, &mut m);
        }
        if t % (200 * MS) == 0 {
            let snap = Snapshot::from_damon(t, 200 * MS, 5 * MS, &regions);
            for (ft, _, vpn, tier, armed_at) in m.add_snapshots(vec![(me, snap)]) {
                m.set_time(Some(ft.max(t - 200 * MS)));
                let f = HintFault {
                    pid: Pid(0),
                    vpn,
                    tier,
                    huge: false,
                    write: false,
                    armed_at,
                };
                pol.on_event(&Event::HintFault(f), &mut m);
            }
        }
        m.set_time(Some(t));
        if daemon_refresh && t % (1000 * MS) == 0 {
            m.refresh_placement(me, &[(p as u64, p as u64 + len as u64)])
                .unwrap();
            for (pid, vpn, from, to) in m.take_unseen_moves() {
                if wants_moves {
                    pol.on_event(&Event::PageMoved { pid, vpn, from, to }, &mut m);
                    moved_events += 1;
                }
            }
            if (m.free_pages(TierId::FAST) as f64) < m.watermarks(TierId::FAST).low {
                pol.on_event(&Event::LowWatermark { tier: TierId::FAST }, &mut m);
            }
        }
        let _ = m.flush_moves(t);
        let cached = m.tier_pages()[0];
        max_fast = max_fast.max(cached);
        let mut walked = 0;
        m.walk_pages(Pid(0), v, pages, &mut |_, p| {
            walked += p.tier.is_fast() as u64
        });
        count_mismatches += (walked != cached) as u64;
    }
    let fast = |a: u64, b: u64| {
        (a..b)
            .filter(|&i| m.page(Pid(0), v + i).is_some_and(|p| p.tier.is_fast()))
            .count() as u64
    };
    let out = Driven {
        hot_fast: fast(0, hot),
        cold_fast: fast(hot, pages),
        max_fast,
        budget,
        count_mismatches,
        moved_events,
    };
    // SAFETY: the mapping above.
    unsafe { libc::munmap(p, len) };
    out
}

#[test]
fn multiclock_promotes_the_hot_set_from_accessed_bits() {
    let (hot, cold) = drive("multiclock", &[], 4096, 512, 20);
    assert!(hot >= 512 * 9 / 10, "hot promoted: {hot}");
    assert_eq!(cold, 0);
}

#[test]
fn chrono_semiauto_promotes_the_hot_set_from_emulated_hint_faults() {
    // Two scans (two-round filter): 4 s scan period instead of the paper's 60 s.
    let (hot, cold) = drive(
        "chrono-semiauto",
        &["scan_period_ms=4000".into()],
        4096,
        512,
        12,
    );
    assert!(hot >= 512 * 9 / 10, "hot promoted: {hot}");
    assert_eq!(cold, 0);
}

#[test]
fn chrono_dcsc_promotes_from_an_all_slow_start() {
    // DCSC counts free fast frames as the fast tier's coldest pages
    // (`dcsc_count_free_fast`), so an empty fast tier gives a positive rate limit
    // rather than 0 MB/s; without them it would enqueue the hot set and promote none.
    let (hot, cold) = drive("chrono", &["scan_period_ms=4000".into()], 4096, 512, 40);
    assert!(hot >= 512 * 9 / 10, "hot promoted: {hot}");
    assert_eq!(cold, 0);
}

#[test]
fn damon_tiering_promotes_the_hot_set() {
    let (hot, cold) = drive("damon-tiering", &[], 4096, 512, 60);
    assert!(hot >= 512 * 9 / 10, "hot promoted: {hot}");
    assert!(cold < 3584 / 10, "cold promoted: {cold}");
}

/// The live contract, for every policy live mode would run with DAMON (accessed bits,
/// hinting faults derived from them) and placement-only ones, in the same scenario as
/// the tests above, with the daemon's once-a-second refresh: nothing panics, the fast
/// tier never holds more than its capacity (the budget) whatever the policy asks, and
/// the placement cache's count always agrees with a walk of its pages. The dry run
/// moves nothing, so each query finds the pages a policy moved where they were and
/// tells it (`PageMoved`): every list-keeping policy's handler runs.
#[test]
fn every_policy_live_mode_runs_with_damon_keeps_the_live_contract() {
    use tierkit_live::config::{runnable, Offer};
    let offer = Offer {
        damon_vaddr: true,
        memory_sampling: false,
    };
    let mut ran = Vec::new();
    for name in tierkit_policies::PolicyConfig::names() {
        if runnable(name, offer).is_err() {
            continue;
        }
        // A hot half against a fast tier of 3/8: promotion runs into the budget.
        let d = drive_with(name, &[], 1024, 512, 15, true);
        assert!(
            d.max_fast <= d.budget,
            "{name}: {} fast pages against a capacity of {}",
            d.max_fast,
            d.budget
        );
        assert_eq!(d.count_mismatches, 0, "{name}: cache counts drifted");
        ran.push((name, d.moved_events));
    }
    // All but the clairvoyant references, all-fast and the three PEBS policies: 16 of 22.
    assert_eq!(ran.len(), 16, "{ran:?}");
    for p in [
        "multiclock",
        "nimble",
        "linux-tiering",
        "tpp",
        "autotiering",
        "pet",
        "mglru-pd",
    ] {
        let told = ran.iter().find(|r| r.0 == p).map_or(0, |r| r.1);
        assert!(told > 0, "{p} was never told of a page moved back: {ran:?}");
    }
    eprintln!("(policy, PageMoved events) in 15 s: {ran:?}");
}
