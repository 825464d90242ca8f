//! Per-page access metadata and the two histograms (MEMTIS §4.1.2, §4.1.3, §4.2.2,
//! §4.3): the state `ksampled` and `kmigrated` share. Pure logic: the policy's
//! plumbing calls the mechanisms and tells this module what happened.
//!
//! **Hotness is stored, not the count.** Each entry keeps `H` (Eq. 1): a huge page
//! gains 1 per sample, a base page or a subpage 512. Cooling halves `H`. For huge
//! pages `H = C`, so this is the paper's halving of `C`; for base pages it halves
//! `C × 512` exactly, which is what makes cooling a one-bin shift of the histogram
//! with only the last bin to correct (§4.2.2) — halving an integer `C` would send a
//! once-sampled base page from bin 9 to bin 0. The artifact stores `H` the same way.

use super::histogram::{bin_floor, bin_of, cooled_bin, Adaptation, Class, Histogram, Thresholds};
use super::split::{skewness, HitWindow};
use std::collections::BTreeMap;
use tierkit_core::*;

/// A page unit's identity: its process and its first 4 KiB page (the head of a huge
/// page).
pub type Key = (Pid, Vpn);

const SUB: usize = SUBPAGES_PER_HUGE as usize;
/// Hotness a sample adds to a base page or a subpage: `C × nr_subpages` (Eq. 1).
pub const BASE_SAMPLE_H: u32 = SUBPAGES_PER_HUGE as u32;

/// Metadata of a base page (the artifact's 8-byte PTE-page entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseMeta {
    /// Hotness `H = C × 512`.
    pub h: u32,
    /// Tier holding the page, as last seen.
    pub tier: TierId,
    /// On the promotion list.
    pub queued: bool,
}

/// Metadata of a huge page and its 512 subpages (struct pages 3–131 of the THP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HugeMeta {
    /// Hotness `H = C` of the huge page.
    pub h: u32,
    /// Tier holding the page, as last seen.
    pub tier: TierId,
    /// On the promotion list.
    pub queued: bool,
    /// On the split queue.
    pub split_queued: bool,
    /// The last benefit-estimation window that sampled this page.
    pub window: u32,
    /// `H_ij = C_ij × 512` of each subpage.
    pub sub: Box<[u32]>,
}

/// One tracked page: base or huge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit {
    /// A 4 KiB page.
    Base(BaseMeta),
    /// A 2 MiB page.
    Huge(Box<HugeMeta>),
}

impl Unit {
    /// Size in 4 KiB pages.
    pub fn pages(&self) -> u64 {
        match self {
            Unit::Base(_) => 1,
            Unit::Huge(_) => SUBPAGES_PER_HUGE,
        }
    }

    /// Hotness `H`.
    pub fn h(&self) -> u32 {
        match self {
            Unit::Base(b) => b.h,
            Unit::Huge(u) => u.h,
        }
    }

    /// Tier as last seen.
    pub fn tier(&self) -> TierId {
        match self {
            Unit::Base(b) => b.tier,
            Unit::Huge(u) => u.tier,
        }
    }

    /// Record the tier the page now lives in.
    pub fn set_tier(&mut self, tier: TierId) {
        match self {
            Unit::Base(b) => b.tier = tier,
            Unit::Huge(u) => u.tier = tier,
        }
    }

    /// Mark or unmark as on the promotion list.
    pub fn set_queued(&mut self, queued: bool) {
        match self {
            Unit::Base(b) => b.queued = queued,
            Unit::Huge(u) => u.queued = queued,
        }
    }

    /// True for a huge page.
    pub fn is_huge(&self) -> bool {
        matches!(self, Unit::Huge(_))
    }
}

/// What a cooling scan found besides the halving.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CoolingScan {
    /// Metadata entries touched (huge pages count 1 + 512).
    pub entries: u64,
    /// Huge pages with a hot subpage, most skewed first: `(S, U, key)`.
    pub skewed: Vec<(f64, u32, Key)>,
    /// 2 MiB regions made entirely of hot base pages (coalescing candidates).
    pub all_hot_regions: Vec<Key>,
}

/// The metadata of every tracked page plus both histograms and the thresholds.
#[derive(Debug, Clone)]
pub struct Pages {
    nr_bins: usize,
    /// Every tracked page unit, in (pid, vpn) order.
    pub units: BTreeMap<Key, Unit>,
    /// The page access histogram over real page units (§4.1.3).
    pub main: Histogram,
    /// The emulated base-page histogram over every 4 KiB page and subpage (§4.3.1).
    pub bp: Histogram,
    /// `T_hot`, `T_warm`, `T_cold` of the page access histogram.
    pub th: Thresholds,
    /// `T_hot^BP` of the base-page histogram.
    pub t_hot_bp: i32,
    /// The current benefit-estimation window.
    pub window: HitWindow,
}

impl Pages {
    /// Empty, with the start-up thresholds (`T_hot = initial_hot`, §4.2.1).
    pub fn new(nr_bins: usize, initial_hot: i32) -> Pages {
        Pages {
            nr_bins,
            units: BTreeMap::new(),
            main: Histogram::new(nr_bins),
            bp: Histogram::new(nr_bins),
            th: Thresholds::initial(initial_hot),
            t_hot_bp: initial_hot,
            window: HitWindow::default(),
        }
    }

    /// The bin of hotness `h`.
    #[inline]
    pub fn bin(&self, h: u32) -> usize {
        bin_of(h, self.nr_bins)
    }

    /// The class of a unit by its hotness.
    pub fn class(&self, unit: &Unit) -> Class {
        self.th.class(self.bin(unit.h()))
    }

    /// The hotness a new page starts with: the lower edge of bin `T_hot`, so that it
    /// is not a demotion candidate before it is sampled (§4.2.1; spec §2.12 item 6).
    pub fn initial_h(&self) -> u32 {
        bin_floor(self.th.hot)
    }

    fn insert_base(&mut self, key: Key, h: u32, tier: TierId) {
        let b = self.bin(h);
        self.main.add(b, 1);
        self.bp.add(b, 1);
        self.units.insert(
            key,
            Unit::Base(BaseMeta {
                h,
                tier,
                queued: false,
            }),
        );
    }

    fn insert_huge(&mut self, key: Key, h: u32, sub: Box<[u32]>, tier: TierId) {
        debug_assert_eq!(sub.len(), SUB);
        self.main.add(self.bin(h), SUBPAGES_PER_HUGE);
        for &s in sub.iter() {
            self.bp.add(self.bin(s), 1);
        }
        self.units.insert(
            key,
            Unit::Huge(Box::new(HugeMeta {
                h,
                tier,
                queued: false,
                split_queued: false,
                window: self.window.id.wrapping_sub(1),
                sub,
            })),
        );
    }

    /// Stop tracking `key`, taking it out of both histograms.
    pub fn remove(&mut self, key: Key) -> Option<Unit> {
        let unit = self.units.remove(&key)?;
        match &unit {
            Unit::Base(b) => {
                let bin = self.bin(b.h);
                self.main.remove(bin, 1);
                self.bp.remove(bin, 1);
            }
            Unit::Huge(u) => {
                self.main.remove(self.bin(u.h), SUBPAGES_PER_HUGE);
                for &s in u.sub.iter() {
                    self.bp.remove(self.bin(s), 1);
                }
            }
        }
        Some(unit)
    }

    /// A page was allocated (first touch): track it at the initial hotness. Any stale
    /// entry covering it is dropped first.
    pub fn on_alloc(&mut self, pid: Pid, vpn: Vpn, tier: TierId, huge: bool) {
        let h = self.initial_h();
        let head = huge_head(vpn);
        if huge {
            let stale: Vec<Key> = self
                .units
                .range((pid, head)..(pid, head + SUBPAGES_PER_HUGE))
                .map(|(k, _)| *k)
                .collect();
            for k in stale {
                self.remove(k);
            }
            self.insert_huge((pid, head), h, vec![h; SUB].into_boxed_slice(), tier);
        } else {
            if head != vpn && self.units.get(&(pid, head)).is_some_and(Unit::is_huge) {
                self.remove((pid, head));
            }
            self.remove((pid, vpn));
            self.insert_base((pid, vpn), h, tier);
        }
    }

    /// `(pid, vpn)` was moved to `tier` by someone else (live): the unit holding it
    /// records its new tier, as a sample of it would.
    pub fn on_moved(&mut self, pid: Pid, vpn: Vpn, tier: TierId) {
        let head = huge_head(vpn);
        if let Some(u) = self.units.get_mut(&(pid, vpn)) {
            u.set_tier(tier);
        } else if let Some(u) = self.units.get_mut(&(pid, head)).filter(|u| u.is_huge()) {
            u.set_tier(tier);
        }
    }

    /// One PEBS sample of `(pid, vpn)` served by `tier` (§4.1, the per-sample handler
    /// of spec §2.4). Updates the hotness of the page (and subpage), both histograms,
    /// the rHR/eHR window, and returns the unit (key, pages) to put on the promotion
    /// list if it is now hot, outside the fast tier and not yet listed (§4.2.3).
    pub fn record_sample(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        tier: TierId,
        huge: bool,
    ) -> Option<(Key, u64)> {
        let key = (pid, if huge { huge_head(vpn) } else { vpn });
        let known = matches!(
            (self.units.get(&key), huge),
            (Some(Unit::Huge(_)), true) | (Some(Unit::Base(_)), false)
        );
        if !known {
            // Allocated before we saw it, or changed shape behind our back.
            self.on_alloc(pid, key.1, tier, huge);
        }
        let nr_bins = self.nr_bins;
        let bin = |h: u32| bin_of(h, nr_bins);
        self.window.samples += 1;
        if tier.is_fast() {
            self.window.rhr_hits += 1;
        }
        let unit = self.units.get_mut(&key).expect("unit just ensured");
        unit.set_tier(tier);
        // eHR counts the 4 KiB page as a hit when it was already hot in the base-page
        // histogram before this access (spec §2.12 item 10; see docs).
        let (new_bin, pages, queued) = match unit {
            Unit::Base(b) => {
                let (old, new) = (b.h, b.h.saturating_add(BASE_SAMPLE_H));
                b.h = new;
                let (ob, nb) = (bin(old), bin(new));
                self.main.shift(ob, nb, 1);
                self.bp.shift(ob, nb, 1);
                if ob as i32 >= self.t_hot_bp {
                    self.window.ehr_hits += 1;
                }
                (nb, 1, &mut b.queued)
            }
            Unit::Huge(u) => {
                let (old, new) = (u.h, u.h.saturating_add(1));
                u.h = new;
                self.main.shift(bin(old), bin(new), SUBPAGES_PER_HUGE);
                let j = (vpn - key.1) as usize;
                let (so, sn) = (u.sub[j], u.sub[j].saturating_add(BASE_SAMPLE_H));
                u.sub[j] = sn;
                self.bp.shift(bin(so), bin(sn), 1);
                if bin(so) as i32 >= self.t_hot_bp {
                    self.window.ehr_hits += 1;
                }
                self.window.huge_samples += 1;
                if u.window != self.window.id {
                    u.window = self.window.id;
                    self.window.huge_pages_seen += 1;
                }
                (bin(new), SUBPAGES_PER_HUGE, &mut u.queued)
            }
        };
        if new_bin as i32 >= self.th.hot && !tier.is_fast() && !*queued {
            *queued = true;
            return Some((key, pages));
        }
        None
    }

    /// Algorithm 1 on both histograms for a fast tier of `fast_pages`: sets `T_hot`,
    /// `T_warm`, `T_cold` and `T_hot^BP`. Returns the main histogram's result.
    pub fn adapt(&mut self, fast_pages: u64, alpha: f64, warm_set: bool) -> Adaptation {
        let a = super::histogram::adapt(&self.main, fast_pages, alpha, warm_set);
        self.th = a.thresholds;
        self.t_hot_bp = super::histogram::adapt(&self.bp, fast_pages, alpha, warm_set)
            .thresholds
            .hot;
        a
    }

    /// Pages of each class `(hot, warm, cold)` in the page access histogram.
    pub fn class_sizes(&self) -> (u64, u64, u64) {
        let n = self.nr_bins as i32;
        let hot = self.main.pages_in(self.th.hot, n - 1);
        let cold = self.main.pages_in(0, self.th.cold);
        (hot, self.main.total() - hot - cold, cold)
    }

    /// Cooling (§4.2.2): shift both histograms one bin left, then halve every page's
    /// and subpage's hotness, moving back the pages the shift misplaced (those of the
    /// unbounded last bin that stay in it). Before halving, the same scan computes
    /// each huge page's skewness (§4.3.2, "kmigrated updates the skewness factor ...
    /// at every cooling interval") and, if asked, finds 2 MiB regions of base pages
    /// that are all hot (§4.3.3). The caller re-runs the threshold adaptation.
    pub fn cool(&mut self, want_skew: bool, want_coalesce: bool) -> CoolingScan {
        let mut scan = CoolingScan::default();
        if want_skew || want_coalesce {
            self.find_split_and_coalesce(want_skew, want_coalesce, &mut scan);
        }
        self.main.cool();
        self.bp.cool();
        let nr_bins = self.nr_bins;
        let bin = |h: u32| bin_of(h, nr_bins);
        let (main, bp) = (&mut self.main, &mut self.bp);
        // Move a page from where the shift assumed it went to where it really is.
        let fix = |hist: &mut Histogram, old: u32, new: u32, pages: u64| {
            hist.shift(cooled_bin(bin(old)), bin(new), pages);
        };
        for unit in self.units.values_mut() {
            match unit {
                Unit::Base(b) => {
                    let old = b.h;
                    b.h = old / 2;
                    fix(main, old, b.h, 1);
                    fix(bp, old, b.h, 1);
                    scan.entries += 1;
                }
                Unit::Huge(u) => {
                    let old = u.h;
                    u.h = old / 2;
                    fix(main, old, u.h, SUBPAGES_PER_HUGE);
                    for s in u.sub.iter_mut() {
                        let old = *s;
                        *s = old / 2;
                        fix(bp, old, *s, 1);
                    }
                    scan.entries += 1 + SUBPAGES_PER_HUGE;
                }
            }
        }
        scan
    }

    fn find_split_and_coalesce(
        &self,
        want_skew: bool,
        want_coalesce: bool,
        scan: &mut CoolingScan,
    ) {
        // Base pages of one 2 MiB region are consecutive in key order.
        let mut region: Option<Key> = None;
        let (mut nr, mut nr_hot) = (0u64, 0u64);
        let close = |region: Option<Key>, nr: u64, nr_hot: u64, out: &mut Vec<Key>| {
            if let Some(r) = region {
                if nr == SUBPAGES_PER_HUGE && nr_hot == SUBPAGES_PER_HUGE {
                    out.push(r);
                }
            }
        };
        for (&(pid, vpn), unit) in &self.units {
            match unit {
                Unit::Huge(u) if want_skew => {
                    let (s, util) = skewness(&u.sub, self.t_hot_bp, self.nr_bins);
                    if s > 0.0 {
                        scan.skewed.push((s, util, (pid, vpn)));
                    }
                }
                Unit::Base(b) if want_coalesce => {
                    let r = (pid, huge_head(vpn));
                    if region != Some(r) {
                        close(region, nr, nr_hot, &mut scan.all_hot_regions);
                        region = Some(r);
                        nr = 0;
                        nr_hot = 0;
                    }
                    nr += 1;
                    if self.th.class(self.bin(b.h)) == Class::Hot {
                        nr_hot += 1;
                    }
                }
                _ => {}
            }
        }
        close(region, nr, nr_hot, &mut scan.all_hot_regions);
        // Most skewed first; ties by address, for determinism.
        scan.skewed
            .sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.cmp(&b.2)));
    }

    /// The huge page at `key` was split by the machine: replace it by base pages for
    /// the subpages still `present` (the rest were freed as never written), each
    /// inheriting its subpage hotness `H_ij` (§4.3.3). Returns `(vpn, tier, H)` of
    /// every surviving subpage; empty if `key` was not a huge page.
    pub fn convert_split(
        &mut self,
        key: Key,
        present: &mut dyn FnMut(Vpn) -> Option<TierId>,
    ) -> Vec<(Vpn, TierId, u32)> {
        if !self.units.get(&key).is_some_and(Unit::is_huge) {
            return Vec::new();
        }
        let Some(Unit::Huge(u)) = self.remove(key) else {
            unreachable!("checked above")
        };
        let mut out = Vec::new();
        for (j, &h) in u.sub.iter().enumerate() {
            let vpn = key.1 + j as u64;
            if let Some(tier) = present(vpn) {
                self.insert_base((key.0, vpn), h, tier);
                out.push((vpn, tier, h));
            }
        }
        out
    }

    /// True if the 2 MiB region at `head` is tracked as 512 base pages, all hot: the
    /// coalescing condition (§4.3.3).
    pub fn all_hot_base(&self, pid: Pid, head: Vpn) -> bool {
        let mut n = 0;
        for (_, unit) in self
            .units
            .range((pid, head)..(pid, head + SUBPAGES_PER_HUGE))
        {
            match unit {
                Unit::Base(b) if self.th.class(self.bin(b.h)) == Class::Hot => n += 1,
                _ => return false,
            }
        }
        n == SUBPAGES_PER_HUGE
    }

    /// The 512 base pages at `head` were collapsed into a huge page in `tier`: track
    /// it as one unit whose count is the sum of its subpages' (`C = Σ C_ij`) and whose
    /// subpages keep their hotness.
    pub fn convert_collapse(&mut self, pid: Pid, head: Vpn, tier: TierId) {
        let mut sub = vec![0u32; SUB].into_boxed_slice();
        let mut sum = 0u64;
        for j in 0..SUB {
            if let Some(u) = self.remove((pid, head + j as u64)) {
                sub[j] = u.h();
                sum += u.h() as u64;
            }
        }
        let h = (sum / SUBPAGES_PER_HUGE).min(u32::MAX as u64) as u32;
        self.insert_huge((pid, head), h, sub, tier);
    }

    /// `[start, start + nr)` of `pid` was unmapped: stop tracking what was in it. A huge
    /// page cut by the range was split by the machine; its subpages still `present`
    /// become base pages. Returns the metadata entries touched.
    pub fn remove_range(
        &mut self,
        pid: Pid,
        start: Vpn,
        nr: u64,
        present: &mut dyn FnMut(Vpn) -> Option<TierId>,
    ) -> u64 {
        let end = start.saturating_add(nr);
        let keys: Vec<Key> = self
            .units
            .range((pid, huge_head(start))..(pid, end))
            .map(|(k, _)| *k)
            .collect();
        let mut touched = 0;
        for key in keys {
            touched += 1;
            let huge = self.units.get(&key).is_some_and(Unit::is_huge);
            if !huge {
                if key.1 >= start {
                    self.remove(key);
                }
            } else if key.1 >= start && key.1 + SUBPAGES_PER_HUGE <= end {
                self.remove(key);
            } else {
                self.convert_split(key, present);
            }
        }
        touched
    }

    /// Tracked memory in 4 KiB pages (what both histograms count).
    pub fn tracked_pages(&self) -> u64 {
        self.main.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtis::histogram::DEFAULT_NR_BINS;

    const P: Pid = Pid(0);
    const SLOW: TierId = TierId(1);

    fn pages() -> Pages {
        Pages::new(DEFAULT_NR_BINS, 1)
    }

    fn check_conservation(p: &Pages) {
        let units: u64 = p.units.values().map(Unit::pages).sum();
        assert_eq!(p.main.total(), units, "main histogram conserves pages");
        assert_eq!(p.bp.total(), units, "base-page histogram conserves pages");
        // And every bin holds exactly the pages whose hotness falls in it.
        let mut main = Histogram::new(DEFAULT_NR_BINS);
        let mut bp = Histogram::new(DEFAULT_NR_BINS);
        for u in p.units.values() {
            main.add(p.bin(u.h()), u.pages());
            match u {
                Unit::Base(b) => bp.add(p.bin(b.h), 1),
                Unit::Huge(h) => h.sub.iter().for_each(|&s| bp.add(p.bin(s), 1)),
            }
        }
        assert_eq!(main, p.main);
        assert_eq!(bp, p.bp);
    }

    /// Spec §7 oracle 4 (Eq. 1): one sample on a base page gives H = 512 (bin 9), one
    /// on a huge page H = 1 (bin 0); a huge page whose 512 subpages get r samples each
    /// lands in the same bin as a base page with r samples.
    #[test]
    fn oracle_04_hotness_scales_by_page_size() {
        let mut p = pages();
        // T_hot = -1 makes new pages start at H = 0, to see the increments alone.
        p.th = Thresholds::initial(-1);
        p.on_alloc(P, 0x1000, SLOW, false);
        p.on_alloc(P, 0x2000, SLOW, true);
        assert_eq!(p.units[&(P, 0x1000)].h(), 0);
        p.record_sample(P, 0x1000, SLOW, false);
        p.record_sample(P, 0x2000 + 5, SLOW, true);
        let base = &p.units[&(P, 0x1000)];
        let Unit::Huge(huge) = &p.units[&(P, 0x2000)] else {
            panic!("huge")
        };
        assert_eq!((base.h(), p.bin(base.h())), (512, 9));
        assert_eq!((huge.h, p.bin(huge.h)), (1, 0));
        // The sampled subpage is hotness 512 in the base-page histogram, like a base page.
        assert_eq!(huge.sub[5], 512);
        assert_eq!(huge.sub[4], 0);
        for r in [1u32, 3, 8] {
            let mut p = pages();
            p.th = Thresholds::initial(-1);
            p.on_alloc(P, 0x1000, SLOW, false);
            p.on_alloc(P, 0x2000, SLOW, true);
            for _ in 0..r {
                p.record_sample(P, 0x1000, SLOW, false);
                for j in 0..SUBPAGES_PER_HUGE {
                    p.record_sample(P, 0x2000 + j, SLOW, true);
                }
            }
            let hb = p.bin(p.units[&(P, 0x1000)].h());
            let hh = p.bin(p.units[&(P, 0x2000)].h());
            assert_eq!(hb, hh, "r = {r}");
            check_conservation(&p);
        }
    }

    /// Spec §7 oracle 8: a new page starts at T_hot, not a demotion candidate.
    #[test]
    fn oracle_08_new_pages_start_at_t_hot() {
        let mut p = pages();
        p.th = Thresholds {
            hot: 10,
            warm: 9,
            cold: 8,
        };
        p.on_alloc(P, 7, TierId::FAST, false);
        let u = &p.units[&(P, 7)];
        assert_eq!(u.h(), 1024);
        assert_eq!(p.class(u), Class::Hot);
    }

    /// Spec §7 oracles 5 and 6: cooling halves every count, the histograms stay exact
    /// (including the last-bin correction) and conserve the tracked pages.
    #[test]
    fn oracle_05_06_cooling_halves_every_page_and_keeps_histograms_exact() {
        let mut p = pages();
        p.th = Thresholds::initial(-1);
        for v in 0..64u64 {
            p.on_alloc(P, 0x10_000 + v, SLOW, false);
        }
        p.on_alloc(P, 0x20_000, SLOW, true);
        // Spread samples: page v gets v² samples; the huge page gets 70 000 samples
        // on subpage 3 (so it reaches the unbounded last bin) and a few elsewhere.
        for v in 0..64u64 {
            for _ in 0..v * v {
                p.record_sample(P, 0x10_000 + v, SLOW, false);
            }
        }
        for i in 0..70_000u64 {
            let j = if i % 10 == 0 { i % 512 } else { 3 };
            p.record_sample(P, 0x20_000 + j, TierId::FAST, true);
        }
        check_conservation(&p);
        let before: Vec<(Key, u32)> = p.units.iter().map(|(k, u)| (*k, u.h())).collect();
        let Unit::Huge(h) = &p.units[&(P, 0x20_000)] else {
            panic!()
        };
        let sub_before = h.sub.clone();
        assert_eq!(p.bin(h.h), 15);
        p.cool(false, false);
        for (k, h) in before {
            assert_eq!(p.units[&k].h(), h / 2);
        }
        let Unit::Huge(h) = &p.units[&(P, 0x20_000)] else {
            panic!()
        };
        for (a, b) in sub_before.iter().zip(h.sub.iter()) {
            assert_eq!(*b, a / 2);
        }
        // 70 000 / 2 = 35 000 ≥ 2^15: still in the last bin, corrected.
        assert_eq!(p.bin(h.h), 15);
        check_conservation(&p);
    }

    #[test]
    fn sample_lists_hot_slow_pages_once() {
        let mut p = pages();
        p.on_alloc(P, 9, SLOW, false);
        // T_hot = 1: the first sample makes H = 2 + 512 (bin 9) hot.
        assert_eq!(p.record_sample(P, 9, SLOW, false), Some(((P, 9), 1)));
        assert_eq!(p.record_sample(P, 9, SLOW, false), None, "already listed");
        // A fast-tier page is never listed.
        p.on_alloc(P, 10, TierId::FAST, false);
        assert_eq!(p.record_sample(P, 10, TierId::FAST, false), None);
        assert_eq!(p.window.samples, 3);
        assert_eq!(p.window.rhr_hits, 1);
    }

    #[test]
    fn split_and_collapse_keep_subpage_hotness() {
        let mut p = pages();
        p.on_alloc(P, 0x400, SLOW, true);
        for _ in 0..3 {
            p.record_sample(P, 0x400 + 17, SLOW, true);
        }
        let h17 = 2 + 3 * 512;
        // Subpages 100..512 were freed by the split.
        let out = p.convert_split((P, 0x400), &mut |v| (v < 0x400 + 100).then_some(SLOW));
        assert_eq!(out.len(), 100);
        assert_eq!(p.units[&(P, 0x400 + 17)].h(), h17);
        assert_eq!(p.tracked_pages(), 100);
        check_conservation(&p);
        assert!(!p.all_hot_base(P, 0x400));
        // Refill the region and make every page hot, then collapse.
        for v in 100..512 {
            p.on_alloc(P, 0x400 + v, TierId::FAST, false);
        }
        p.th = Thresholds::initial(1);
        assert!(p.all_hot_base(P, 0x400));
        p.convert_collapse(P, 0x400, TierId::FAST);
        let Unit::Huge(h) = &p.units[&(P, 0x400)] else {
            panic!()
        };
        assert_eq!(h.sub[17], h17);
        assert_eq!(p.tracked_pages(), 512);
        check_conservation(&p);
    }

    #[test]
    fn unmap_drops_pages_and_splits_cut_huge_pages() {
        let mut p = pages();
        p.on_alloc(P, 0, SLOW, true);
        p.on_alloc(P, 512, SLOW, true);
        p.on_alloc(P, 1024, SLOW, false);
        // Unmap [256, 1025): the first huge page is cut in half, the second and the
        // base page go.
        p.remove_range(P, 256, 769, &mut |v| (v < 256).then_some(SLOW));
        assert_eq!(p.tracked_pages(), 256);
        assert!(p.units.contains_key(&(P, 255)));
        assert!(!p.units.contains_key(&(P, 512)));
        check_conservation(&p);
    }

    #[test]
    fn cooling_scan_ranks_skewed_huge_pages_first() {
        let mut p = pages();
        p.th = Thresholds::initial(-1);
        p.t_hot_bp = 10;
        p.on_alloc(P, 0, SLOW, true);
        p.on_alloc(P, 512, SLOW, true);
        // Page 0: one subpage sampled 8 times (H_ij = 4096, bin 12).
        for _ in 0..8 {
            p.record_sample(P, 3, SLOW, true);
        }
        // Page 512: every subpage sampled 8 times: uniform.
        for j in 0..512 {
            for _ in 0..8 {
                p.record_sample(P, 512 + j, SLOW, true);
            }
        }
        let scan = p.cool(true, false);
        assert_eq!(scan.skewed.len(), 2);
        assert_eq!(scan.skewed[0].2, (P, 0));
        assert_eq!(scan.skewed[0].1, 1);
        assert_eq!(scan.skewed[1].1, 512);
        assert_eq!(scan.entries, 2 * 513);
    }
}
