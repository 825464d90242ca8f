//! Chrono's proactive demotion (§3.3): the promotion-aware `pro` watermark (§3.3.1)
//! and the page thrashing monitor (§3.3.2). The demotion itself — LRU victims from
//! the fast tier's inactive list, demoted by a kswapd-like thread — is the shared
//! [`crate::lru`] machinery; this module holds the pure logic on top of it.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tierkit_core::*;

/// The `pro` watermark of the fast tier, pages (§3.3.1): `high` plus a gap of
/// "twice the default scan interval multiplied by the promotion rate limit", room for
/// the promotions that can arrive while a two-round selection completes. The gap is
/// capped at `max_gap_pages` (tierkit: a quarter of the tier, so a mis-set rate limit
/// cannot empty the fast tier).
pub fn pro_watermark(
    wm: Watermarks,
    interval_ms: u64,
    rate_limit_bytes_per_s: f64,
    max_gap_pages: u64,
) -> f64 {
    let gap_bytes = 2.0 * interval_ms as f64 / 1000.0 * rate_limit_bytes_per_s;
    let gap_pages = (gap_bytes / PAGE_SIZE as f64).ceil() as u64;
    wm.high + gap_pages.min(max_gap_pages) as f64
}

/// What makes a demoted page's return a thrashing event (§3.3.2: "marked as
/// promotion candidate again"; spec §2.15 item 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThrashEvent {
    /// Its first CIT after demotion is below the threshold: it becomes a round-1
    /// candidate (the spec's reading; the artifact's `PGDEMOTED_HOT`).
    #[default]
    Candidate,
    /// It passes every round of the filter and is queued for promotion again.
    Promotion,
}

/// The thrashing monitor (§3.3.2): remembers recently demoted pages, counts the ones
/// that become promotion candidates again within a scan period, and at the end of
/// each period halves the rate limit for the next one when thrashing events exceed a
/// share of the period's promotions.
#[derive(Debug, Clone, Default)]
pub struct ThrashMonitor {
    /// What counts as a thrashing event.
    event: ThrashEvent,
    /// Demoted pages (huge-page heads) → demotion time, ns. Lookups only.
    demoted: HashMap<(Pid, Vpn), Nanos>,
    /// Thrashing events of the current period, in base pages.
    events_pages: u64,
    /// Pages promoted in the current period.
    promoted_pages: u64,
    /// The rate limit is halved in the current period.
    halved: bool,
    nr_events_total: u64,
    nr_halvings: u64,
}

impl ThrashMonitor {
    /// A monitor counting `event`s.
    pub fn new(event: ThrashEvent) -> ThrashMonitor {
        ThrashMonitor {
            event,
            ..ThrashMonitor::default()
        }
    }

    /// A page was demoted at `now` (the `demoted` flag; the caller re-arms it).
    pub fn on_demoted(&mut self, pid: Pid, page: Vpn, now: Nanos) {
        self.demoted.insert((pid, page), now);
    }

    /// Pages currently flagged `demoted`.
    pub fn nr_flagged(&self) -> usize {
        self.demoted.len()
    }

    /// A regular-path fault of a slow page after its demotion, with what the
    /// candidate filter made of it (`hot` = it passed this round, `promote` = it
    /// passed the last round and goes to the queue). A thrashing event is a flagged
    /// page that becomes a promotion candidate again within `period_ns` of its
    /// demotion (§3.3.2). With [`ThrashEvent::Candidate`] that is its first fault
    /// being hot, and the flag is consumed by that fault (the artifact test-and-clears
    /// it at the first hint fault); with [`ThrashEvent::Promotion`] the flag survives
    /// hot rounds and the event is the page reaching the queue. Returns true for an
    /// event.
    #[allow(clippy::too_many_arguments)]
    pub fn on_fault(
        &mut self,
        pid: Pid,
        page: Vpn,
        hot: bool,
        promote: bool,
        unit_pages: u64,
        now: Nanos,
        period_ns: u64,
    ) -> bool {
        let Some(&at) = self.demoted.get(&(pid, page)) else {
            return false;
        };
        let (event, clear) = match self.event {
            ThrashEvent::Candidate => (hot, true),
            ThrashEvent::Promotion => (promote, !hot || promote),
        };
        if clear {
            self.demoted.remove(&(pid, page));
        }
        let event = event && now.saturating_sub(at) <= period_ns;
        if event {
            self.events_pages += unit_pages;
            self.nr_events_total += unit_pages;
        }
        event
    }

    /// Pages promoted (the denominator, "the overall promotion rate").
    pub fn on_promoted(&mut self, pages: u64) {
        self.promoted_pages += pages;
    }

    /// Forget a page (unmapped, or promoted again).
    pub fn forget(&mut self, pid: Pid, page: Vpn) {
        self.demoted.remove(&(pid, page));
    }

    /// Forget the flags of `pid` in `[start, start + nr_pages)`.
    pub fn forget_range(&mut self, pid: Pid, start: Vpn, nr_pages: u64) {
        let end = start.saturating_add(nr_pages);
        let head = huge_head(start);
        self.demoted
            .retain(|&(p, v), _| !(p == pid && v >= head && v < end));
    }

    /// Drop flags older than `age_ns` (their pages were not faulted within a scan
    /// period, so they can no longer cause an event).
    pub fn expire(&mut self, now: Nanos, age_ns: u64) {
        self.demoted
            .retain(|_, &mut at| now.saturating_sub(at) <= age_ns);
    }

    /// End of a scan period: compare thrashing events with promotions; if their ratio
    /// exceeds `ratio_threshold` (0.2 = 20%), the next period runs at half the rate
    /// limit. Zero promotions count as one so a period with events but no promotions
    /// still halves. Returns the new state (true = halved).
    pub fn end_period(&mut self, ratio_threshold: f64) -> bool {
        let ratio = self.events_pages as f64 / self.promoted_pages.max(1) as f64;
        self.halved = ratio > ratio_threshold;
        if self.halved {
            self.nr_halvings += 1;
        }
        self.events_pages = 0;
        self.promoted_pages = 0;
        self.halved
    }

    /// Multiplier on the rate limit in force: 0.5 while halved, else 1.
    pub fn rate_factor(&self) -> f64 {
        if self.halved {
            0.5
        } else {
            1.0
        }
    }

    /// Thrashing events so far, base pages.
    pub fn nr_events(&self) -> u64 {
        self.nr_events_total
    }

    /// Periods run at half rate so far.
    pub fn nr_halvings(&self) -> u64 {
        self.nr_halvings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NS_PER_MS;
    const PERIOD: u64 = 60_000 * MS;

    #[test]
    fn pro_watermark_gap_is_twice_interval_times_rate() {
        let wm = Watermarks::pages(100, 125, 150);
        // 100 MB/s × 2 × 1 s = 200 MiB = 51200 pages (MB = MiB, as the kernel's MBps).
        assert_eq!(
            pro_watermark(wm, 1000, 100.0 * MIB as f64, u64::MAX),
            (150 + 51_200) as f64
        );
        assert_eq!(pro_watermark(wm, 1000, 0.0, u64::MAX), 150.0);
        assert_eq!(pro_watermark(wm, 1000, 100.0 * MIB as f64, 1000), 1150.0);
    }

    /// Spec §7 oracle 14: the rate limit is halved for the next period exactly when
    /// thrashing events exceed 20% of the period's promotions, and only for that one.
    #[test]
    fn oracle_14_thrashing_halves_the_rate_limit_exactly_above_the_ratio() {
        let p = Pid(0);
        let mut t = ThrashMonitor::new(ThrashEvent::Candidate);
        let demote_and_refault = |t: &mut ThrashMonitor, n: u64| {
            for v in 0..n {
                t.on_demoted(p, v, 0);
                assert!(t.on_fault(p, v, true, false, 1, 10 * MS, PERIOD));
            }
        };
        // 20 events for 100 promotions: exactly 20%, not above → full rate.
        demote_and_refault(&mut t, 20);
        t.on_promoted(100);
        assert!(!t.end_period(0.2));
        assert_eq!(t.rate_factor(), 1.0);
        // 21 for 100: above → half for the next period.
        demote_and_refault(&mut t, 21);
        t.on_promoted(100);
        assert!(t.end_period(0.2));
        assert_eq!(t.rate_factor(), 0.5);
        // A quiet period restores the full rate.
        t.on_promoted(100);
        assert!(!t.end_period(0.2));
        assert_eq!(t.rate_factor(), 1.0);
        assert_eq!(t.nr_halvings(), 1);
        assert_eq!(t.nr_events(), 41);
        // Events without promotions halve.
        demote_and_refault(&mut t, 1);
        assert!(t.end_period(0.2));
    }

    /// Spec §7 oracle 15: only a demoted page that is hot within a scan period of its
    /// demotion is an event, and the flag is consumed by its first fault.
    #[test]
    fn oracle_15_only_hot_refaults_within_a_period_are_events() {
        let p = Pid(1);
        let mut t = ThrashMonitor::new(ThrashEvent::Candidate);
        t.on_demoted(p, 1, 0);
        t.on_demoted(p, 2, 0);
        t.on_demoted(p, 3, 0);
        assert!(
            !t.on_fault(p, 1, false, false, 1, 5 * MS, PERIOD),
            "cold refault"
        );
        assert!(
            !t.on_fault(p, 1, true, false, 1, 6 * MS, PERIOD),
            "flag consumed"
        );
        assert!(
            !t.on_fault(p, 2, true, false, 1, PERIOD + 1, PERIOD),
            "too late"
        );
        assert!(t.on_fault(p, 3, true, false, 512, PERIOD, PERIOD));
        assert!(
            !t.on_fault(p, 9, true, false, 1, 0, PERIOD),
            "never demoted"
        );
        assert_eq!(t.nr_events(), 512);
        // The promotion reading: hot rounds keep the flag, the queueing is the event,
        // a cold round clears it.
        let mut q = ThrashMonitor::new(ThrashEvent::Promotion);
        q.on_demoted(p, 1, 0);
        q.on_demoted(p, 2, 0);
        assert!(!q.on_fault(p, 1, true, false, 1, MS, PERIOD));
        assert!(q.on_fault(p, 1, true, true, 1, 2 * MS, PERIOD));
        assert!(
            !q.on_fault(p, 1, true, true, 1, 3 * MS, PERIOD),
            "flag consumed"
        );
        assert!(!q.on_fault(p, 2, true, false, 1, MS, PERIOD));
        assert!(!q.on_fault(p, 2, false, false, 1, 2 * MS, PERIOD));
        assert!(
            !q.on_fault(p, 2, true, true, 1, 3 * MS, PERIOD),
            "cleared by the cold round"
        );
        assert_eq!(q.nr_events(), 1);
        t.on_demoted(p, 600, 0);
        t.on_demoted(p, 4, 0);
        t.forget_range(p, 513, 100);
        assert_eq!(t.nr_flagged(), 1);
        t.expire(2 * PERIOD, PERIOD);
        assert_eq!(t.nr_flagged(), 0);
    }
}
