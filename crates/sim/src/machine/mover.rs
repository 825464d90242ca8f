//! The mover: carries out a migration (capacity, page-table effects, counters, bandwidth and copy cost).

use super::*;

impl Machine {
    /// Set up a migration's page-table effects and counters; `n` pages from `from` to
    /// `to`. Shared by migrate, exchange and collapse. An exchange passes through a
    /// transient over-capacity state between its two halves, so capacity is checked by
    /// the callers once the whole move is done.
    pub(super) fn account_move(&mut self, from: usize, to: usize, n: u64) {
        self.tiers[from].used -= n;
        self.tiers[to].used += n;
        let bytes = n * PAGE_SIZE;
        self.counters.migrated_bytes += bytes;
        if to < from {
            self.counters.promoted_pages += n;
        } else {
            self.counters.demoted_pages += n;
        }
        let now = self.now;
        self.occupy_bandwidth(from, now, bytes as f64);
        self.occupy_bandwidth(to, now, bytes as f64);
    }

    pub(super) fn charge_migration(&mut self, bytes: u64, mode: MigrateMode) {
        let cost = (self.costs.migrate_fixed_ns + bytes as f64 * self.ns_per_copy_byte)
            * self.event_weight;
        if mode == MigrateMode::Async {
            self.as_kthread_payer(|m| m.charge(cost));
        } else {
            self.charge(cost);
        }
    }

    /// Locate the unit of `(pid, vpn)`: (vma index, unit index).
    pub(super) fn locate(&self, pid: Pid, vpn: Vpn) -> Option<(usize, usize)> {
        let space = self.spaces.get(pid.index())?;
        let vi = space.find_const(vpn)?;
        let v = &space.vmas[vi];
        let ui = v.unit_index(vpn);
        v.pages[ui].present().then_some((vi, ui))
    }

    /// Change the tier of a located unit (all 512 entries of a huge page) and stamp
    /// its demotion time; returns the number of base pages.
    pub(super) fn retier(&mut self, pid: Pid, vi: usize, ui: usize, to: u8) -> u64 {
        let now_ms = (self.now as u64 / NS_PER_MS).max(1) as u32;
        let window = self.pingpong_window_ms;
        let v = &mut self.spaces[pid.index()].vmas[vi];
        let from = v.pages[ui].tier();
        let n = if v.pages[ui].huge() {
            SUBPAGES_PER_HUGE as usize
        } else {
            1
        };
        let mut pingpong = false;
        for p in &mut v.pages[ui..ui + n] {
            p.set_tier(to);
        }
        let head = &mut v.pages[ui];
        if to < from {
            pingpong = head.demoted_at_ms != 0 && (now_ms - head.demoted_at_ms) as u64 <= window;
        } else {
            head.demoted_at_ms = now_ms;
        }
        if pingpong {
            self.counters.pingpong_pages += n as u64;
        }
        n as u64
    }

    #[inline]
    pub(super) fn debug_check_capacity(&self) {
        debug_assert!(
            self.tiers.iter().all(|t| t.used <= t.capacity),
            "a tier is over capacity after a migration"
        );
    }

    pub(super) fn try_migrate(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        to: TierId,
        mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        if to.index() >= self.tiers.len() {
            return Err(MigrateError::BadTier);
        }
        let (vi, ui) = self.locate(pid, vpn).ok_or(MigrateError::NotPresent)?;
        let p = self.spaces[pid.index()].vmas[vi].pages[ui];
        if p.tier() == to.0 {
            return Err(MigrateError::AlreadyThere);
        }
        let n = if p.huge() { SUBPAGES_PER_HUGE } else { 1 };
        if !self.has_room(to.index(), n) {
            return Err(MigrateError::NoSpace);
        }
        self.retier(pid, vi, ui, to.0);
        self.account_move(p.tier() as usize, to.index(), n);
        self.debug_check_capacity();
        self.charge_migration(n * PAGE_SIZE, mode);
        Ok(())
    }
}
