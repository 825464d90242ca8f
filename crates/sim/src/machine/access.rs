//! The access hot path: translate, allocate on first touch, deliver hinting faults and samples, filter through the LLC, charge the serving tier.

use super::*;

/// What [`Machine::serve`] did: the thread's clock after the access, whether it missed
/// the LLC, and the tier and kind of the page that served it.
struct Served {
    clock: f64,
    miss: bool,
    tier: u8,
    huge: bool,
}

impl Machine {
    /// Allocate the page unit holding `vpn` on first touch: the fastest tier with free
    /// pages above its min watermark (Linux's zonelist fallback). Returns (tier, huge).
    fn allocate(&mut self, pid: u32, vi: usize, vpn: Vpn) -> Result<(u8, bool), SimError> {
        let v = &self.spaces[pid as usize].vmas[vi];
        // A 2 MiB range gets a huge page only if none of it is resident yet (after a
        // split, the remaining base pages keep the range on PTEs, as in Linux). A
        // range holding a page sampled in time stays on base pages: the rest of it may
        // not be simulated.
        let huge = self.thp
            && v.huge_eligible(vpn)
            && !self.sampler.region_holds_time_sampled(pid, vpn)
            && {
                let head = (huge_head(vpn) - v.vma.start_vpn) as usize;
                v.pages[head..head + SUBPAGES_PER_HUGE as usize]
                    .iter()
                    .all(|p| !p.present())
            };
        let room = |m: &Self, n: u64| (0..m.tiers.len()).find(|&t| m.has_room(t, n));
        // A huge page that fits in no tier falls back to a base page, as Linux's THP
        // fault does when the huge allocation fails.
        let huge_tier = if huge {
            room(self, SUBPAGES_PER_HUGE)
        } else {
            None
        };
        let (huge, n, tier) = match huge_tier {
            Some(t) => (true, SUBPAGES_PER_HUGE, Some(t)),
            None => (false, 1, room(self, 1)),
        };
        let Some(tier) = tier else {
            return Err(SimError::OutOfMemory {
                pid,
                capacities: self
                    .tiers
                    .iter()
                    .map(|t| t.capacity.to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
            });
        };
        let v = &mut self.spaces[pid as usize].vmas[vi];
        if huge {
            let head = (huge_head(vpn) - v.vma.start_vpn) as usize;
            for p in &mut v.pages[head..head + n as usize] {
                debug_assert!(!p.present());
                *p = PageState::resident(tier as u8, F_HUGE);
            }
        } else {
            let i = (vpn - v.vma.start_vpn) as usize;
            v.pages[i] = PageState::resident(tier as u8, 0);
        }
        self.spaces[pid as usize].rss_pages += n;
        self.tiers[tier].used += n;
        self.counters.allocated_pages += n;
        Ok((tier as u8, huge))
    }

    /// Tiers (other than the last) whose free pages fell below `low` and that may
    /// raise a LowWatermark event now (at most one per ms per tier).
    fn low_watermark_tiers(&mut self, upto: usize) -> Vec<TierId> {
        let now_ms = self.now as u64 / NS_PER_MS;
        let last = self.tiers.len() - 1;
        let mut out = Vec::new();
        for (i, t) in self
            .tiers
            .iter_mut()
            .enumerate()
            .take(upto.min(last - 1) + 1)
        {
            if (t.free() as f64) < t.wm.low && t.last_low_event_ms != Some(now_ms) {
                t.last_low_event_ms = Some(now_ms);
                out.push(TierId(i as u8));
            }
        }
        out
    }

    /// Ask the host CPU to start loading the page state and LLC set that an access of
    /// thread `tid` to `addr` will touch. The engine calls this a few operations
    /// ahead: random accesses over gigabytes of simulated memory otherwise stall on a
    /// host cache miss for every simulated access. Only a hint; it changes nothing.
    #[inline]
    pub fn prefetch(&self, tid: usize, addr: u64) {
        let pid = self.thread_pid[tid] as usize;
        let vpn = addr >> PAGE_SHIFT;
        if let Some(v) = self.spaces[pid].cached_vma() {
            if v.vma.contains(vpn) {
                tierkit_core::host::prefetch(&v.pages[(vpn - v.vma.start_vpn) as usize]);
            }
        }
        if let Some(llc) = &self.llc {
            llc.prefetch(pid as u32, addr);
        }
    }

    /// [`Machine::access`] on its common path alone: the page is in the VMA of the
    /// thread's process's last lookup, resident and not armed, and no sample falls
    /// due. Returns the clock after the access, or `None`, having changed nothing,
    /// when any of that does not hold (then the caller makes the same access through
    /// [`Machine::access`]). Nothing in it calls a function, so in the engine's loop
    /// the thread's clock and the loop's invariants stay in host registers: with the
    /// fault and sample calls in the same loop they lived on the stack, and each access
    /// waited on their stores (docs/performance.md).
    #[inline(always)]
    pub fn access_fast(
        &mut self,
        tid: usize,
        clock: f64,
        addr: u64,
        write: bool,
        gap_ns: u32,
        inv_mlp: f64,
    ) -> Option<f64> {
        let pid = self.thread_pid[tid];
        let k = write as usize;
        // A countdown at one may fire on this access: the sample goes to the policy.
        if self.sample_period[k] != 0 && self.sample_countdown[k] == 1 {
            return None;
        }
        let vpn = addr >> PAGE_SHIFT;
        let vi = self.spaces[pid as usize].cached(vpn)?;
        let (exact, ui) = {
            let v = &self.spaces[pid as usize].vmas[vi];
            let exact = (vpn - v.vma.start_vpn) as usize;
            let ui = v.unit_index(vpn);
            if !(v.pages[exact].present() && v.pages[ui].flags & F_ARMED == 0) {
                return None;
            }
            (exact, ui)
        };
        let clock = clock + gap_ns as f64 * self.gap_weight;
        self.counters.accesses += 1;
        let served = self.serve(tid, pid, vi, exact, ui, addr, write, clock, inv_mlp);
        if self.sample_period[k] != 0 && (write || served.miss) {
            self.sample_countdown[k] -= 1;
        }
        Some(served.clock)
    }

    /// One access by global thread `tid` whose memory-level parallelism is
    /// `1 / inv_mlp`, its clock `clock` when it starts; returns the clock after it.
    /// Every case: the engine calls it where [`Machine::access_fast`] declines.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub fn access(
        &mut self,
        tid: usize,
        clock: f64,
        addr: u64,
        write: bool,
        gap_ns: u32,
        inv_mlp: f64,
        policy: &mut dyn Policy,
    ) -> Result<f64, SimError> {
        let pid = self.thread_pid[tid];
        // The thread's clock is written back before anything else (the fault path, a
        // policy) can read it.
        let mut clock = clock + gap_ns as f64 * self.gap_weight;
        self.counters.accesses += 1;
        let vpn = addr >> PAGE_SHIFT;
        let space = &mut self.spaces[pid as usize];
        let Some(mut vi) = space.find(vpn) else {
            self.clocks[tid] = clock;
            return Err(SimError::Unmapped { pid, addr });
        };
        // Not resident, or armed: fault the page in and deliver the hinting fault.
        let common = {
            let v = &space.vmas[vi];
            let p = &v.pages[(vpn - v.vma.start_vpn) as usize];
            p.present() && v.pages[v.unit_index(vpn)].flags & F_ARMED == 0
        };
        if !common {
            self.clocks[tid] = clock;
            vi = self.fault_in(tid, pid, vi, vpn, addr, write, policy)?;
            clock = self.clocks[tid];
        }
        let (exact, ui) = {
            let v = &self.spaces[pid as usize].vmas[vi];
            ((vpn - v.vma.start_vpn) as usize, v.unit_index(vpn))
        };
        let served = self.serve(tid, pid, vi, exact, ui, addr, write, clock, inv_mlp);
        // PEBS-like counters: LLC load misses, and all stores.
        let k = write as usize;
        if self.sample_period[k] != 0 && (write || served.miss) {
            self.sample_countdown[k] -= 1;
            if self.sample_countdown[k] == 0 {
                self.sample_countdown[k] = self.sample_period[k];
                let kind = if write {
                    SampleKind::Store
                } else {
                    SampleKind::LlcLoadMiss
                };
                self.deliver_sample(tid, pid, vpn, served.tier, served.huge, kind, policy);
                // The policy may have charged the thread.
                return Ok(self.clocks[tid]);
            }
        }
        Ok(served.clock)
    }

    /// The part of an access after translation, on a resident unarmed page (index
    /// `exact` in VMA `vi`, its page unit's head at `ui`): mark the page, filter
    /// through the LLC, count and charge the serving tier, and store the thread's
    /// clock. One borrow of the VMA's pages serves the whole access; the tiers and the
    /// LLC are other fields of the machine.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn serve(
        &mut self,
        tid: usize,
        pid: u32,
        vi: usize,
        exact: usize,
        ui: usize,
        addr: u64,
        write: bool,
        mut clock: f64,
        inv_mlp: f64,
    ) -> Served {
        let w = self.event_weight;
        let pages = &mut self.spaces[pid as usize].vmas[vi].pages;
        let unit = &mut pages[ui];
        unit.flags |= F_ACCESSED;
        let tier = unit.tier();
        let huge = unit.huge();
        let page = &mut pages[exact];
        page.flags |= if write { F_WRITTEN } else { 0 };
        let miss = match &mut self.llc {
            None => true,
            Some(llc) => match llc.access(pid, addr, write, tier) {
                LlcResult::Hit => false,
                LlcResult::Miss { writeback } => {
                    if let Some(wt) = writeback {
                        book_bandwidth(&mut self.tiers[wt as usize], clock, CACHE_LINE as f64);
                    }
                    true
                }
            },
        };
        let latency = if miss {
            if page.epoch_accesses == 0 {
                self.placement_scratch.note_accessed(pid, vi, exact);
            }
            page.epoch_accesses = page.epoch_accesses.saturating_add(1);
            self.counters.mem_accesses_by_tier[tier as usize] += 1;
            // The wait is already in machine time: on a sampled machine the tier's
            // bandwidth is shrunk, so one line occupies it for 1/rate line times.
            let t = &mut self.tiers[tier as usize];
            let wait = book_bandwidth(t, clock, CACHE_LINE as f64);
            (if write { t.store_ns } else { t.load_ns }) * w + wait
        } else {
            self.counters.llc_hits += 1;
            self.costs.llc_hit_ns * w
        };
        clock += latency * inv_mlp;
        self.clocks[tid] = clock;
        Served {
            clock,
            miss,
            tier,
            huge,
        }
    }

    /// The slow path of an access: fault the page in if it is not resident, and
    /// deliver the hinting fault if it is armed. The handler may migrate or split the
    /// page, or free the subpage (a split that drops zero subpages): then this access
    /// faults it back in. Returns the VMA index to use afterwards.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn fault_in(
        &mut self,
        tid: usize,
        pid: u32,
        vi: usize,
        vpn: Vpn,
        addr: u64,
        write: bool,
        policy: &mut dyn Policy,
    ) -> Result<usize, SimError> {
        self.ensure_present(tid, pid, vi, vpn, policy)?;
        let v = &mut self.spaces[pid as usize].vmas[vi];
        let ui = v.unit_index(vpn);
        if v.pages[ui].flags & F_ARMED == 0 {
            return Ok(vi);
        }
        v.pages[ui].flags &= !F_ARMED;
        let fault = HintFault {
            pid: Pid(pid),
            vpn,
            tier: TierId(v.pages[ui].tier()),
            huge: v.pages[ui].huge(),
            write,
            armed_at: (v.pages[ui].armed_at as f64 * self.policy_time_scale) as Nanos,
        };
        self.counters.hint_faults += 1;
        self.enter(self.clocks[tid], Payer::Thread(tid));
        self.charge_event(self.costs.hint_fault_ns);
        policy.on_event(&Event::HintFault(fault), self);
        let Some(vi) = self.spaces[pid as usize].find(vpn) else {
            return Err(SimError::Unmapped { pid, addr });
        };
        self.ensure_present(tid, pid, vi, vpn, policy)?;
        Ok(vi)
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver_sample(
        &mut self,
        tid: usize,
        pid: u32,
        vpn: Vpn,
        tier: u8,
        huge: bool,
        kind: SampleKind,
        policy: &mut dyn Policy,
    ) {
        self.counters.samples += 1;
        self.enter(self.clocks[tid], Payer::Kthread);
        self.charge_event(self.costs.sample_ns);
        let s = Sample {
            pid: Pid(pid),
            vpn,
            tier: TierId(tier),
            huge,
            kind,
        };
        policy.on_event(&Event::Sample(s), self);
    }

    /// Fault the page of `vpn` in if it is not resident. A policy reacting to the
    /// allocation may split the new huge page and free this still-zero subpage; the
    /// access then faults again, as it would in Linux — a few times at most.
    #[inline]
    fn ensure_present(
        &mut self,
        tid: usize,
        pid: u32,
        vi: usize,
        vpn: Vpn,
        policy: &mut dyn Policy,
    ) -> Result<(), SimError> {
        for _ in 0..8 {
            let v = &self.spaces[pid as usize].vmas[vi];
            if v.pages[(vpn - v.vma.start_vpn) as usize].present() {
                return Ok(());
            }
            self.first_touch(tid, pid, vi, vpn, policy)?;
        }
        Err(SimError::Policy {
            why: format!(
                "process {pid} page {vpn:#x} was freed by the policy on each of 8 faults in a row"
            ),
        })
    }

    #[cold]
    fn first_touch(
        &mut self,
        tid: usize,
        pid: u32,
        vi: usize,
        vpn: Vpn,
        policy: &mut dyn Policy,
    ) -> Result<(), SimError> {
        let (tier, huge) = self.allocate(pid, vi, vpn)?;
        self.enter(self.clocks[tid], Payer::Thread(tid));
        if self.page_alloc_events {
            let v = if huge { huge_head(vpn) } else { vpn };
            let ev = Event::PageAlloc {
                pid: Pid(pid),
                vpn: v,
                tier: TierId(tier),
                huge,
            };
            policy.on_event(&ev, self);
        }
        for t in self.low_watermark_tiers(tier as usize) {
            self.enter(self.clocks[tid], Payer::Kthread);
            policy.on_event(&Event::LowWatermark { tier: t }, self);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quiet;
    impl Policy for Quiet {
        fn name(&self) -> &'static str {
            "quiet"
        }
        fn on_event(&mut self, _: &Event, _: &mut dyn Mechanisms) {}
    }

    fn machine(llc: bool, thp: ThpMode) -> Machine {
        let cfg = crate::config::MachineConfig {
            thp,
            ..crate::testing::small_machine(4, 64)
        };
        crate::testing::bare_machine(&cfg, llc.then_some((64 * 64 * 4, 4)))
    }

    /// Everything an access may change.
    fn state(m: &Machine) -> (String, Vec<PageState>) {
        let pages = m.spaces[0]
            .vmas
            .iter()
            .flat_map(|v| v.pages.iter().copied());
        let rest = format!(
            "{:?} {:?} {:?} {:?} {:?} {:?}",
            m.counters,
            m.clocks,
            m.sample_countdown,
            m.placement_scratch,
            m.tiers,
            m.spaces[0].cached(64 << 8)
        );
        (rest, pages.collect())
    }

    /// The engine's way (the fast path, the general one where it declines) and the
    /// general path alone give the same machine after every access, through first
    /// touches, two VMAs, huge and base pages, armed pages, samples falling due and
    /// the LLC; and where the fast path declines it has changed nothing.
    #[test]
    fn the_fast_path_declines_untouched_and_otherwise_is_the_general_path() {
        let cases =
            [false, true].map(|llc| [ThpMode::Never, ThpMode::Always].map(|thp| (llc, thp)));
        for (llc, thp) in cases.into_iter().flatten() {
            let (mut engine, mut general) = (machine(llc, thp), machine(llc, thp));
            for m in [&mut engine, &mut general] {
                m.mmap(0, 0, 4 << 20, VmaKind::Anon).unwrap();
                m.mmap(0, 64 << 20, 4 << 20, VmaKind::Anon).unwrap();
                m.set_sample_period(SampleKind::LlcLoadMiss, 7);
                m.set_sample_period(SampleKind::Store, 11);
            }
            let (mut a, mut b) = (0.0, 0.0);
            let mut declined = 0;
            let mut x = 12345u64;
            for i in 0..2000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let base = if (i / 100) % 2 == 0 { 0 } else { 64 << 20 };
                let addr = base + (x >> 8) % (256 << 10);
                let write = x & 2 != 0;
                let gap = (x >> 40) as u32 % 50;
                if i % 97 == 0 {
                    for m in [&mut engine, &mut general] {
                        m.arm_hint_fault(Pid(0), addr >> PAGE_SHIFT);
                    }
                }
                let before = state(&engine);
                a = match engine.access_fast(0, a, addr, write, gap, 0.5) {
                    Some(c) => c,
                    None => {
                        declined += 1;
                        assert_eq!(
                            state(&engine),
                            before,
                            "a declining fast path changed the machine"
                        );
                        engine
                            .access(0, a, addr, write, gap, 0.5, &mut Quiet)
                            .unwrap()
                    }
                };
                b = general
                    .access(0, b, addr, write, gap, 0.5, &mut Quiet)
                    .unwrap();
                assert_eq!(a, b, "access {i}");
                assert_eq!(state(&engine), state(&general), "access {i}");
            }
            assert!(
                declined > 0 && declined < 1000,
                "{declined} declined of 2000"
            );
        }
    }
}
