//! [`Mechanisms`] for the simulated machine: what a policy may observe and do.

use super::*;

impl Machine {
    fn for_each_unit(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        mut f: impl FnMut(Vpn, &mut PageState),
    ) -> u64 {
        let Some(space) = self.spaces.get_mut(pid.index()) else {
            return 0;
        };
        let end = start_vpn.saturating_add(nr_pages);
        let first = space.vmas.partition_point(|v| v.vma.end_vpn() <= start_vpn);
        let mut walked = 0;
        let sampler = &self.sampler;
        let pid32 = pid.0;
        for v in &mut space.vmas[first..] {
            if v.vma.start_vpn >= end {
                break;
            }
            let mut vpn = start_vpn.max(v.vma.start_vpn);
            let stop = end.min(v.vma.end_vpn());
            while vpn < stop {
                // A unit (region or page) a sampled run does not simulate holds no
                // page: count its entries as walked (the real walk would visit them)
                // without reading.
                let (kept, unit_end) = sampler.unit_at(pid32, &v.strata, vpn);
                let next = unit_end.min(stop);
                if !kept {
                    walked += next - vpn;
                    vpn = next;
                    continue;
                }
                // Every page of a kept unit is kept: read them without asking the
                // sampler again (a hash per page was most of a walk's time).
                while vpn < next {
                    let i = (vpn - v.vma.start_vpn) as usize;
                    let p = &mut v.pages[i];
                    walked += 1;
                    if p.huge() {
                        let head = huge_head(vpn);
                        let hi = (head - v.vma.start_vpn) as usize;
                        f(head, &mut v.pages[hi]);
                        vpn = head + SUBPAGES_PER_HUGE;
                    } else {
                        if p.present() {
                            f(vpn, p);
                        }
                        vpn += 1;
                    }
                }
            }
        }
        walked
    }

    /// `walk_pages`, calling `f` only for the units in `tier` where one is given: the
    /// walk and its charge are the same either way.
    fn walk(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        tier: Option<TierId>,
        f: &mut dyn FnMut(Vpn, PageInfo),
    ) -> u64 {
        let walked = self.for_each_unit(pid, start_vpn, nr_pages, |vpn, p| {
            if tier.is_none_or(|t| t.0 == p.tier()) {
                f(
                    vpn,
                    PageInfo {
                        tier: TierId(p.tier()),
                        huge: p.huge(),
                    },
                )
            }
        });
        self.charge(walked as f64 * self.costs.pte_scan_ns);
        walked
    }
}

impl Mechanisms for Machine {
    fn now(&self) -> Nanos {
        self.policy_time(self.now)
    }

    fn tiers(&self) -> &[TierInfo] {
        &self.tier_info
    }

    fn free_pages(&self, tier: TierId) -> u64 {
        self.tiers.get(tier.index()).map_or(0, |t| t.free())
    }

    fn watermarks(&self, tier: TierId) -> Watermarks {
        self.tiers[tier.index()].wm
    }

    fn processes(&self) -> Vec<Pid> {
        (0..self.spaces.len() as u32).map(Pid).collect()
    }

    fn vmas(&self, pid: Pid) -> Vec<Vma> {
        self.spaces
            .get(pid.index())
            .map(|s| s.vmas.iter().map(|v| v.vma).collect())
            .unwrap_or_default()
    }

    fn rss_pages(&self, pid: Pid) -> u64 {
        self.spaces.get(pid.index()).map_or(0, |s| s.rss_pages)
    }

    fn pages_per_simulated_page(&self) -> u64 {
        self.sampler.keeps_one_in()
    }

    fn access_count(&self) -> Option<u64> {
        // Those that reached memory: a clairvoyant reference reads the future as
        // memory sees it (llc::MemoryStream).
        Some(self.counters.mem_accesses_by_tier.iter().sum())
    }

    fn would_map_huge(
        &self,
        pid: Pid,
        kind: VmaKind,
        start_vpn: Vpn,
        nr_pages: u64,
        vpn: Vpn,
    ) -> bool {
        // The strata a mapping gets depend only on its range (Machine::mmap); without
        // THP there is nothing to derive.
        self.thp && {
            let strata = self.sampler.strata_of(start_vpn, nr_pages);
            crate::space::huge_eligible(kind, start_vpn, start_vpn + nr_pages, &strata, vpn)
                && !self.sampler.region_holds_time_sampled(pid.0, vpn)
        }
    }

    fn page(&self, pid: Pid, vpn: Vpn) -> Option<PageInfo> {
        let (vi, ui) = self.locate(pid, vpn)?;
        let p = self.spaces[pid.index()].vmas[vi].pages[ui];
        Some(PageInfo {
            tier: TierId(p.tier()),
            huge: p.huge(),
        })
    }

    fn walk_pages(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        f: &mut dyn FnMut(Vpn, PageInfo),
    ) -> u64 {
        self.walk(pid, start_vpn, nr_pages, None, f)
    }

    fn walk_tier_pages(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        tier: TierId,
        f: &mut dyn FnMut(Vpn, PageInfo),
    ) -> u64 {
        self.walk(pid, start_vpn, nr_pages, Some(tier), f)
    }

    fn arm_hint_fault(&mut self, pid: Pid, vpn: Vpn) -> bool {
        self.observes(|r| r.hint_faults, "armed a hinting fault", "hint_faults");
        let Some((vi, ui)) = self.locate(pid, vpn) else {
            return false;
        };
        let now = self.now as Nanos;
        let p = &mut self.spaces[pid.index()].vmas[vi].pages[ui];
        // Already PROT_NONE: the kernel leaves the PTE (and its scan time) alone.
        if p.flags & F_ARMED == 0 {
            p.flags |= F_ARMED;
            p.armed_at = now;
            self.counters.armed_ptes += 1;
        }
        self.charge_event(self.costs.pte_scan_ns);
        true
    }

    fn arm_range(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        tier_filter: Option<TierId>,
    ) -> u64 {
        self.observes(|r| r.hint_faults, "armed hinting faults", "hint_faults");
        let now = self.now as Nanos;
        let mut armed = 0;
        let walked = self.for_each_unit(pid, start_vpn, nr_pages, |_, p| {
            if p.flags & F_ARMED == 0 && tier_filter.is_none_or(|t| t.0 == p.tier()) {
                p.flags |= F_ARMED;
                p.armed_at = now;
                armed += 1;
            }
        });
        self.counters.armed_ptes += armed;
        self.charge(walked as f64 * self.costs.pte_scan_ns);
        armed
    }

    fn test_and_clear_young(&mut self, pid: Pid, vpn: Vpn) -> Option<bool> {
        self.observes(
            |r| r.accessed_bits,
            "tested an accessed bit",
            "accessed_bits",
        );
        let (vi, ui) = self.locate(pid, vpn)?;
        let p = &mut self.spaces[pid.index()].vmas[vi].pages[ui];
        let young = p.flags & F_ACCESSED != 0;
        p.flags &= !F_ACCESSED;
        self.counters.young_tests += 1;
        self.charge_event(self.costs.young_test_ns);
        Some(young)
    }

    fn set_sample_period(&mut self, kind: SampleKind, period: u64) {
        self.observes(|r| r.sampling, "set a sample period", "sampling");
        let k = (kind == SampleKind::Store) as usize;
        self.sample_period[k] = period;
        self.sample_countdown[k] = period;
    }

    fn schedule(&mut self, at: Nanos, id: TimerId, runner: Runner) {
        // Policy time back to machine time.
        let at = ((at as f64 / self.policy_time_scale) as Nanos).max(self.now as Nanos);
        self.timer_seq += 1;
        let task = match runner {
            Runner::Kthread => None,
            Runner::Task(p) => Some(p.0),
        };
        self.timers.push(Reverse(TimerEntry {
            at,
            seq: self.timer_seq,
            id,
            task,
        }));
        self.earliest_new_timer = self.earliest_new_timer.min(at as f64);
    }

    fn charge_cpu(&mut self, ns: u64) {
        // A policy's own work is per page or per event it handles, so on a sampled
        // machine each unit of it stands for 1/rate units.
        self.charge_event(ns as f64);
    }

    fn as_kthread(&mut self, work: &mut dyn FnMut(&mut dyn Mechanisms)) {
        self.as_kthread_payer(|m| work(m));
    }

    fn stall_app_threads(&mut self, ns: u64) {
        // Time, not work per event: not scaled by the sample rate. `ns` is policy
        // time (as `now`), which runs policy_time_scale times faster.
        if self.shared_tiering_cpus {
            self.shared_stall_per_thread_pending += ns as f64 / self.policy_time_scale;
        }
    }

    fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn random_page(&mut self, pid: Pid, start_vpn: Vpn, nr_pages: u64) -> Vpn {
        let vpn = start_vpn + self.rng.next_u64() % nr_pages.max(1);
        if self.sampler.keeps_all() {
            return vpn;
        }
        let Some(space) = self.spaces.get(pid.index()) else {
            return vpn;
        };
        let Some(vi) = space.find_const(vpn) else {
            return vpn;
        };
        let v = &space.vmas[vi];
        let rep = self.sampler.representative(pid.0, &v.strata, vpn);
        // The stratum may reach past the range or the VMA (a partial munmap keeps the
        // mapping's strata); the draw then stays where it fell, on a page not simulated.
        if rep >= start_vpn && rep < start_vpn + nr_pages && v.vma.contains(rep) {
            rep
        } else {
            vpn
        }
    }

    fn migrate(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        to: TierId,
        mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        let r = self.try_migrate(pid, vpn, to, mode);
        if r.is_err() {
            self.counters.failed_migrations += 1;
        }
        r
    }

    fn exchange(
        &mut self,
        a: (Pid, Vpn),
        b: (Pid, Vpn),
        mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        let r = (|| {
            let (avi, aui) = self.locate(a.0, a.1).ok_or(MigrateError::NotPresent)?;
            let (bvi, bui) = self.locate(b.0, b.1).ok_or(MigrateError::NotPresent)?;
            let pa = self.spaces[a.0.index()].vmas[avi].pages[aui];
            let pb = self.spaces[b.0.index()].vmas[bvi].pages[bui];
            if pa.tier() == pb.tier() {
                return Err(MigrateError::AlreadyThere);
            }
            if pa.huge() != pb.huge() {
                return Err(MigrateError::NoSpace);
            }
            let n = self.retier(a.0, avi, aui, pb.tier());
            self.retier(b.0, bvi, bui, pa.tier());
            self.account_move(pa.tier() as usize, pb.tier() as usize, n);
            self.account_move(pb.tier() as usize, pa.tier() as usize, n);
            self.debug_check_capacity();
            self.charge_migration(n * PAGE_SIZE, mode);
            self.charge_migration(n * PAGE_SIZE, mode);
            Ok(())
        })();
        if r.is_err() {
            self.counters.failed_migrations += 1;
        }
        r
    }

    fn split_huge(&mut self, pid: Pid, vpn: Vpn, free_zero_subpages: bool) -> Option<u64> {
        let (vi, _) = self.locate(pid, vpn)?;
        let v = &mut self.spaces[pid.index()].vmas[vi];
        if !v.split_unit(vpn) {
            return None;
        }
        let mut freed = 0;
        if free_zero_subpages {
            let head = (huge_head(vpn) - v.vma.start_vpn) as usize;
            for p in &mut v.pages[head..head + SUBPAGES_PER_HUGE as usize] {
                if p.flags & F_WRITTEN == 0 {
                    self.tiers[p.tier() as usize].used -= 1;
                    *p = PageState::EMPTY;
                    freed += 1;
                }
            }
            self.spaces[pid.index()].rss_pages -= freed;
        }
        self.counters.huge_splits += 1;
        self.charge_event(self.costs.split_ns);
        Some(freed)
    }

    fn collapse_huge(&mut self, pid: Pid, vpn: Vpn, tier: TierId) -> Result<(), MigrateError> {
        let head = huge_head(vpn);
        let space = self
            .spaces
            .get(pid.index())
            .ok_or(MigrateError::NotPresent)?;
        let vi = space.find_const(head).ok_or(MigrateError::NotPresent)?;
        let v = &space.vmas[vi];
        if !v.huge_eligible(head) || self.sampler.region_holds_time_sampled(pid.0, head) {
            return Err(MigrateError::NotPresent);
        }
        if tier.index() >= self.tiers.len() {
            return Err(MigrateError::BadTier);
        }
        let hi = (head - v.vma.start_vpn) as usize;
        let range = hi..hi + SUBPAGES_PER_HUGE as usize;
        if v.pages[range.clone()]
            .iter()
            .any(|p| !p.present() || p.huge())
        {
            return Err(MigrateError::NotPresent);
        }
        let mut incoming = vec![0u64; self.tiers.len()];
        for p in &v.pages[range.clone()] {
            if p.tier() != tier.0 {
                incoming[p.tier() as usize] += 1;
            }
        }
        let need: u64 = incoming.iter().sum();
        if need > 0 && !self.has_room(tier.index(), need) {
            self.counters.failed_migrations += 1;
            return Err(MigrateError::NoSpace);
        }
        let v = &mut self.spaces[pid.index()].vmas[vi];
        let young = v.pages[range.clone()]
            .iter()
            .any(|p| p.flags & F_ACCESSED != 0);
        for p in &mut v.pages[range.clone()] {
            p.set_tier(tier.0);
            p.flags = (p.flags & F_WRITTEN) | F_HUGE;
        }
        if young {
            v.pages[hi].flags |= F_ACCESSED;
        }
        for (from, &n) in incoming.iter().enumerate() {
            if n > 0 {
                self.account_move(from, tier.index(), n);
            }
        }
        self.debug_check_capacity();
        self.counters.huge_collapses += 1;
        self.charge_migration(HUGE_PAGE_SIZE, MigrateMode::Async);
        Ok(())
    }
}
