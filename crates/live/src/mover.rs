//! The mover's pure logic: a queue of page moves the policy asked for, drained in
//! bounded batches under a token-bucket rate cap (pages per second). The daemon
//! hands each batch to move_pages(2), one call per process in it. Moves of all the
//! processes tiered share the queue and the cap, in the order the policy asked.

use std::collections::{HashMap, VecDeque};
use tierkit_core::{Nanos, Pid, TierId, Vpn, NS_PER_SEC};

/// Bounds of the mover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoverLimits {
    /// Pages per move_pages(2) call.
    pub batch_pages: usize,
    /// Pages per second, at most.
    pub rate_pages_per_s: u64,
    /// Queued pages at most; further requests are refused.
    pub max_queue_pages: usize,
}

/// One queued move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// Process (the policy's id).
    pub pid: Pid,
    /// Page.
    pub vpn: Vpn,
    /// Tier it was in when queued.
    pub from: TierId,
    /// Tier asked for.
    pub to: TierId,
    /// Tries that failed for a passing reason (the target node full, the page busy).
    pub attempts: u8,
}

/// Tries of one move before it is given up: the first and the retries after passing
/// failures (ENOMEM, EBUSY), each after the daemon's back-off, so a move waits through
/// about a minute and a half of a full node (1 + 2 + 4 + 8 + 16 + 30 + 30 s) — the
/// kernel's own migration retries a page 10 times, but within one call.
pub const MOVE_ATTEMPTS: u8 = 8;

/// The queue and its token bucket.
#[derive(Debug, Clone)]
pub struct Mover {
    limits: MoverLimits,
    order: VecDeque<(Pid, Vpn)>,
    pending: HashMap<(Pid, Vpn), Move>,
    /// Per tier index: queued moves into it minus queued moves out of it. Kept up to
    /// date on every change because `free_pages` reads it, and policies call that in
    /// per-page loops: recounting the queue there made a large demotion quadratic
    /// (a 45 000-page budget demotion never reached move_pages in the QEMU guest).
    net: Vec<i64>,
    tokens: f64,
    last_ns: Nanos,
}

impl Mover {
    /// An empty mover with a full bucket (one batch).
    pub fn new(limits: MoverLimits) -> Mover {
        Mover {
            limits,
            order: VecDeque::new(),
            pending: HashMap::new(),
            net: Vec::new(),
            tokens: limits.batch_pages as f64,
            last_ns: 0,
        }
    }

    /// Queue a move of page `vpn` of process `pid` from `from` to `to`. A second
    /// request for a queued page replaces the first; one back to where the page was
    /// cancels it. False when the queue is full.
    pub fn enqueue(&mut self, pid: Pid, vpn: Vpn, from: TierId, to: TierId) -> bool {
        let key = (pid, vpn);
        if let Some(&m) = self.pending.get(&key) {
            self.count(&m, -1);
            if m.from == to {
                self.pending.remove(&key);
            } else {
                let m = Move { to, ..m };
                self.count(&m, 1);
                self.pending.insert(key, m);
            }
            return true;
        }
        if self.pending.len() >= self.limits.max_queue_pages {
            return false;
        }
        let m = Move {
            pid,
            vpn,
            from,
            to,
            attempts: 0,
        };
        self.count(&m, 1);
        self.pending.insert(key, m);
        self.order.push_back(key);
        true
    }

    /// Add (`sign` 1) or remove (-1) a queued move's effect on [`Mover::net_into`].
    fn count(&mut self, m: &Move, sign: i64) {
        let need = m.from.index().max(m.to.index()) + 1;
        if self.net.len() < need {
            self.net.resize(need, 0);
        }
        self.net[m.to.index()] += sign;
        self.net[m.from.index()] -= sign;
    }

    /// The queued move of page `vpn` of `pid`.
    pub fn pending(&self, pid: Pid, vpn: Vpn) -> Option<Move> {
        self.pending.get(&(pid, vpn)).copied()
    }

    /// The queue bound.
    pub fn max_queue(&self) -> usize {
        self.limits.max_queue_pages
    }

    /// Queued pages.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Drop queued moves of `pid`'s pages in `[start, end)` (unmapped, or the
    /// process is gone).
    pub fn forget_range(&mut self, pid: Pid, start: Vpn, end: Vpn) {
        let gone: Vec<Move> = self
            .pending
            .values()
            .filter(|m| m.pid == pid && (start..end).contains(&m.vpn))
            .copied()
            .collect();
        for m in gone {
            self.count(&m, -1);
            self.pending.remove(&(m.pid, m.vpn));
        }
    }

    /// Pages queued to enter (`to == tier`) minus pages queued to leave.
    pub fn net_into(&self, tier: TierId) -> i64 {
        self.net.get(tier.index()).copied().unwrap_or(0)
    }

    fn refill(&mut self, now: Nanos) {
        let dt = now.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now);
        let cap = self.limits.batch_pages as f64;
        self.tokens = (self.tokens
            + dt as f64 * self.limits.rate_pages_per_s as f64 / NS_PER_SEC as f64)
            .min(cap);
    }

    /// Queue `m` again after a try that failed for a passing reason, at the back.
    /// False, and nothing queued, when it has had its [`MOVE_ATTEMPTS`] or the policy
    /// asked for the page again meanwhile.
    pub fn retry(&mut self, m: Move) -> bool {
        let key = (m.pid, m.vpn);
        if m.attempts + 1 >= MOVE_ATTEMPTS || self.pending.contains_key(&key) {
            return false;
        }
        let m = Move {
            attempts: m.attempts + 1,
            ..m
        };
        self.count(&m, 1);
        self.pending.insert(key, m);
        self.order.push_back(key);
        true
    }

    /// The next batch allowed at `now` (empty if the bucket is dry or nothing waits).
    pub fn next_batch(&mut self, now: Nanos) -> Vec<Move> {
        self.refill(now);
        let n = (self.tokens.floor() as usize).min(self.limits.batch_pages);
        let mut out = Vec::with_capacity(n.min(self.pending.len()));
        while out.len() < n {
            let Some(key) = self.order.pop_front() else {
                break;
            };
            if let Some(m) = self.pending.remove(&key) {
                self.count(&m, -1);
                out.push(m);
            }
        }
        self.tokens -= out.len() as f64;
        out
    }

    /// When the bucket will next hold a page, if something waits.
    pub fn next_ready_ns(&self, now: Nanos) -> Option<Nanos> {
        if self.pending.is_empty() {
            return None;
        }
        if self.tokens >= 1.0 {
            return Some(now);
        }
        let need = 1.0 - self.tokens;
        let wait = need * NS_PER_SEC as f64 / self.limits.rate_pages_per_s.max(1) as f64;
        Some(self.last_ns.max(now) + wait.ceil() as Nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: TierId = TierId(0);
    const S: TierId = TierId(1);
    const P: Pid = Pid(0);

    fn limits() -> MoverLimits {
        MoverLimits {
            batch_pages: 4,
            rate_pages_per_s: 100,
            max_queue_pages: 10,
        }
    }

    #[test]
    fn batches_are_bounded_and_rate_capped() {
        let mut m = Mover::new(limits());
        for v in 0..10 {
            assert!(m.enqueue(P, v, S, F));
        }
        assert!(!m.enqueue(P, 99, S, F), "queue bound");
        // Full bucket: one batch of 4, then dry.
        assert_eq!(m.next_batch(0).len(), 4);
        assert!(m.next_batch(0).is_empty());
        // 100 pages/s: 10 ms gives one page, 40 ms a full batch, never more than 4.
        assert_eq!(m.next_batch(10_000_000).len(), 1);
        assert_eq!(m.next_ready_ns(10_000_000), Some(20_000_000));
        assert_eq!(m.next_batch(10_000_000 + 1_000_000_000).len(), 4);
        assert_eq!(m.len(), 1);
        assert_eq!(m.next_batch(3_000_000_000)[0].vpn, 9, "FIFO order");
        assert!(m.is_empty() && m.next_ready_ns(0).is_none());
    }

    /// `net_into` as it was computed before it was kept incrementally.
    fn recount(m: &Mover, tier: TierId) -> i64 {
        m.pending
            .values()
            .map(|x| (x.to == tier) as i64 - (x.from == tier) as i64)
            .sum()
    }

    #[test]
    fn net_into_stays_equal_to_a_recount_of_the_queue() {
        let mut m = Mover::new(MoverLimits {
            batch_pages: 3,
            rate_pages_per_s: 1000,
            max_queue_pages: 20,
        });
        // A fixed pseudo-random walk over enqueue, requeue, cancel, batches, unmaps.
        let mut x: u64 = 12345;
        for step in 0..2000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let vpn = (x >> 33) % 32;
            let (a, b) = if (x >> 20) & 1 == 0 { (S, F) } else { (F, S) };
            match (x >> 40) % 8 {
                0..=4 => {
                    m.enqueue(P, vpn, a, b);
                }
                5 => {
                    m.next_batch(step * 1_000_000);
                }
                6 => m.forget_range(P, vpn, vpn + 4),
                _ => {
                    m.enqueue(P, vpn, b, a);
                }
            }
            for t in [F, S] {
                assert_eq!(m.net_into(t), recount(&m, t), "step {step}");
            }
        }
    }

    #[test]
    fn requeue_replaces_and_move_back_cancels() {
        let mut m = Mover::new(limits());
        m.enqueue(P, 1, S, F);
        m.enqueue(P, 2, F, S);
        assert_eq!(m.net_into(F), 0);
        m.enqueue(P, 3, S, F);
        assert_eq!(m.net_into(F), 1);
        m.enqueue(P, 1, F, S); // back to where it was
        assert!(m.pending(P, 1).is_none());
        m.forget_range(P, 2, 3);
        assert!(m.pending(P, 2).is_none());
        let b = m.next_batch(0);
        assert_eq!(
            b,
            vec![Move {
                pid: P,
                vpn: 3,
                from: S,
                to: F,
                attempts: 0
            }]
        );
    }

    #[test]
    fn a_failed_move_is_retried_until_its_attempts_run_out() {
        let mut m = Mover::new(limits());
        m.enqueue(P, 5, S, F);
        let mut tries = 0;
        loop {
            let b = m.next_batch((tries + 1) * NS_PER_SEC);
            assert_eq!(b.len(), 1);
            tries += 1;
            assert_eq!(m.net_into(F), 0, "out of the queue while tried");
            if !m.retry(b[0]) {
                break;
            }
            assert_eq!(m.net_into(F), 1, "back in the queue");
        }
        assert_eq!(tries, MOVE_ATTEMPTS as u64);
        assert!(m.is_empty());
        // A page the policy asked for again meanwhile is not retried over it.
        m.enqueue(P, 6, S, F);
        let b = m.next_batch(100 * NS_PER_SEC);
        m.enqueue(P, 6, S, F);
        assert!(!m.retry(b[0]));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn the_same_page_number_in_two_processes_is_two_moves() {
        let mut m = Mover::new(limits());
        let q = Pid(1);
        assert!(m.enqueue(P, 7, S, F));
        assert!(m.enqueue(q, 7, S, F));
        assert_eq!(m.len(), 2);
        assert_eq!(m.net_into(F), 2);
        // Forgetting one process's range leaves the other's page queued.
        m.forget_range(P, 0, 100);
        assert!(m.pending(P, 7).is_none());
        assert_eq!(m.pending(q, 7).map(|x| x.pid), Some(q));
        assert_eq!(m.next_batch(0).len(), 1);
    }
}
