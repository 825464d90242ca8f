//! Address spaces: processes, their VMAs, and per-page state.
//!
//! Each VMA owns a dense array of [`PageState`], one per 4 KiB page (16 bytes each, so
//! the machine stays well under its 32-bytes-per-page budget). A huge page is 512
//! consecutive entries with the `HUGE` flag and one tier; its accessed and armed bits
//! and its arm time live in the head entry, as a PMD entry holds them for the whole
//! 2 MiB.
//!
//! A page never touched is all zero bytes ([`PageState::EMPTY`]), so a VMA's array
//! comes from the allocator already zeroed and the host backs only the entries the run
//! writes: a sampled run writes the entries of its kept regions alone (a 1/256 sample
//! of 250 GiB of mappings touched all of its 1 GiB of page state when the empty state
//! was written out).

use tierkit_core::{huge_head, MappingStrata, Nanos, Vma, VmaKind, Vpn, SUBPAGES_PER_HUGE};

/// Tier value of a page that is not resident.
pub const NOT_PRESENT: u8 = u8::MAX;

/// Page-state flag: accessed ("young") since the last test-and-clear.
pub const F_ACCESSED: u8 = 1;
/// Page-state flag: armed for a hinting fault.
pub const F_ARMED: u8 = 2;
/// Page-state flag: part of a huge page.
pub const F_HUGE: u8 = 4;
/// Page-state flag: written at least once (a never-written page is all zeroes).
pub const F_WRITTEN: u8 = 8;

/// The state of one base page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct PageState {
    /// When the page was armed (valid while `F_ARMED`), ns.
    pub armed_at: Nanos,
    /// Simulated ms of the page's last demotion (0: never), for ping-pong accounting.
    pub demoted_at_ms: u32,
    /// Tier index + 1, or 0 when not resident (so that [`EMPTY`](Self::EMPTY) is all
    /// zero bytes); read and written through [`tier`](Self::tier) and
    /// [`set_tier`](Self::set_tier).
    tier_slot: u8,
    /// `F_*` flags.
    pub flags: u8,
    /// Memory accesses to this exact 4 KiB page in the current placement epoch
    /// (saturating); read and reset by the placement-quality metric.
    pub epoch_accesses: u16,
}

const _: () = assert!(std::mem::size_of::<PageState>() == 16);

impl PageState {
    /// A page never touched.
    pub const EMPTY: PageState = PageState {
        armed_at: 0,
        demoted_at_ms: 0,
        tier_slot: 0,
        flags: 0,
        epoch_accesses: 0,
    };

    /// A resident page of `tier` with `flags`, its other fields empty.
    #[inline]
    pub const fn resident(tier: u8, flags: u8) -> PageState {
        PageState {
            tier_slot: tier.wrapping_add(1),
            flags,
            ..PageState::EMPTY
        }
    }

    /// Tier index, or [`NOT_PRESENT`].
    #[inline]
    pub fn tier(&self) -> u8 {
        self.tier_slot.wrapping_sub(1)
    }

    /// Put the page in `tier` ([`NOT_PRESENT`]: not resident).
    #[inline]
    pub fn set_tier(&mut self, tier: u8) {
        self.tier_slot = tier.wrapping_add(1);
    }

    /// True if resident.
    #[inline]
    pub fn present(&self) -> bool {
        self.tier_slot != 0
    }

    /// True if part of a huge page.
    #[inline]
    pub fn huge(&self) -> bool {
        self.flags & F_HUGE != 0
    }
}

/// A VMA with its pages.
#[derive(Debug, Clone)]
pub struct VmaState {
    /// The area.
    pub vma: Vma,
    /// One state per base page.
    pub pages: Vec<PageState>,
    /// How a sampled run samples the mapping this area came from (kept by both parts
    /// of a partial unmap).
    pub strata: MappingStrata,
}

impl VmaState {
    /// Index of the entry that holds the state of `vpn`'s page unit: the huge-page head
    /// for a huge page, else `vpn` itself.
    #[inline]
    pub fn unit_index(&self, vpn: Vpn) -> usize {
        let i = (vpn - self.vma.start_vpn) as usize;
        if self.pages[i].huge() {
            (huge_head(vpn) - self.vma.start_vpn) as usize
        } else {
            i
        }
    }

    /// Whether the 2 MiB range holding `vpn` lies wholly inside this anonymous VMA, so
    /// it may be backed by a huge page (and, in a run sampled by mapping, inside the
    /// part of the mapping sampled by region).
    pub fn huge_eligible(&self, vpn: Vpn) -> bool {
        huge_eligible(
            self.vma.kind,
            self.vma.start_vpn,
            self.vma.end_vpn(),
            &self.strata,
            vpn,
        )
    }
}

/// Whether the 2 MiB range holding `vpn` may be backed by a huge page in a mapping of
/// `kind` over `[start_vpn, end_vpn)` sampled as `strata` says: anonymous, wholly
/// inside, and (sampled by mapping) inside the part sampled by region.
pub fn huge_eligible(
    kind: VmaKind,
    start_vpn: Vpn,
    end_vpn: Vpn,
    strata: &MappingStrata,
    vpn: Vpn,
) -> bool {
    let head = huge_head(vpn);
    kind == VmaKind::Anon
        && head >= start_vpn
        && head + SUBPAGES_PER_HUGE <= end_vpn
        && strata.huge_allowed(head)
}

/// One process: its VMAs in address order.
#[derive(Debug, Clone, Default)]
pub struct AddressSpace {
    /// VMAs sorted by start, non-overlapping.
    pub vmas: Vec<VmaState>,
    /// Resident base pages.
    pub rss_pages: u64,
    /// Index of the VMA found by the last lookup (a one-entry cache).
    last: usize,
}

impl AddressSpace {
    /// Index of the VMA containing `vpn`.
    #[inline]
    pub fn find(&mut self, vpn: Vpn) -> Option<usize> {
        if let Some(v) = self.vmas.get(self.last) {
            if v.vma.contains(vpn) {
                return Some(self.last);
            }
        }
        let i = self.find_const(vpn)?;
        self.last = i;
        Some(i)
    }

    /// The index of the VMA of the last successful lookup, if it holds `vpn`: the
    /// lookup of [`find`](Self::find) that changes nothing.
    #[inline]
    pub fn cached(&self, vpn: Vpn) -> Option<usize> {
        let v = self.vmas.get(self.last)?;
        v.vma.contains(vpn).then_some(self.last)
    }

    /// The VMA of the last successful lookup, if any.
    #[inline]
    pub fn cached_vma(&self) -> Option<&VmaState> {
        self.vmas.get(self.last)
    }

    /// Like [`find`](Self::find) without updating the cache.
    pub fn find_const(&self, vpn: Vpn) -> Option<usize> {
        let i = self.vmas.partition_point(|v| v.vma.end_vpn() <= vpn);
        (i < self.vmas.len() && self.vmas[i].vma.contains(vpn)).then_some(i)
    }

    /// Insert a new VMA sampled as `strata` says, in a run that simulates one 2 MiB
    /// region in `keeps_one_in` (1: exact); fails if it overlaps an existing one.
    pub fn insert(
        &mut self,
        vma: Vma,
        strata: MappingStrata,
        keeps_one_in: u64,
    ) -> Result<(), String> {
        let i = self
            .vmas
            .partition_point(|v| v.vma.end_vpn() <= vma.start_vpn);
        if i < self.vmas.len() && self.vmas[i].vma.start_vpn < vma.end_vpn() {
            return Err(format!(
                "mmap of pages [{:#x}, {:#x}) overlaps an existing mapping",
                vma.start_vpn,
                vma.end_vpn()
            ));
        }
        self.vmas.insert(
            i,
            VmaState {
                vma,
                pages: empty_pages(vma.nr_pages as usize, keeps_one_in),
                strata,
            },
        );
        self.last = 0;
        Ok(())
    }

    /// The state of the page unit holding `vpn`, if mapped.
    pub fn unit(&self, vpn: Vpn) -> Option<&PageState> {
        let v = &self.vmas[self.find_const(vpn)?];
        Some(&v.pages[v.unit_index(vpn)])
    }
}

/// `n` empty page states for a mapping of a run that simulates one region in
/// `keeps_one_in`. [`PageState::EMPTY`] is all zero bytes, so the array is taken zeroed
/// from the allocator (fresh pages the host maps only when written) and only the
/// entries the run writes cost host memory. The host is asked for huge pages where the
/// entries the run will touch, one in `keeps_one_in`, still span 8 MiB or more: random
/// reads over that much state miss the host's TLB on base pages
/// ([`tierkit_core::host::vec_on_huge_pages`]), while a huge page of state, 512 MiB of
/// mapping, holds a kept region at every rate down to 1/256 and so would back all of
/// it.
fn empty_pages(n: usize, keeps_one_in: u64) -> Vec<PageState> {
    if n == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<PageState>(n).expect("page-state array size");
    // SAFETY: `layout` is non-zero in size (n > 0). PageState is `repr(C)` and made of
    // integers only, so all zero bytes are a valid value (`PageState::EMPTY`,
    // `empty_page_state_is_all_zero_bytes`); the allocation has the layout of `n` of
    // them from the global allocator, which `Vec::from_raw_parts` then owns with length
    // and capacity `n`.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<PageState>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let touched = layout.size() as u64 / keeps_one_in.max(1);
        if touched >= tierkit_core::host::HUGE_HINT_MIN_BYTES as u64 {
            tierkit_core::host::advise_huge_pages(ptr as usize, layout.size());
        }
        Vec::from_raw_parts(ptr, n, n)
    }
}

impl VmaState {
    /// Turn the huge page holding `vpn` into 512 base pages that keep its tier and
    /// bits; each keeps its own written bit and epoch count (accesses to that 4 KiB
    /// page, which the head does not hold for the others). Returns false if it was not
    /// huge.
    pub fn split_unit(&mut self, vpn: Vpn) -> bool {
        let i = (vpn - self.vma.start_vpn) as usize;
        if !self.pages[i].huge() {
            return false;
        }
        let head = (huge_head(vpn) - self.vma.start_vpn) as usize;
        let h = self.pages[head];
        for p in &mut self.pages[head..head + SUBPAGES_PER_HUGE as usize] {
            let written = p.flags & F_WRITTEN;
            *p = PageState {
                flags: (h.flags & !(F_HUGE | F_WRITTEN)) | written,
                epoch_accesses: p.epoch_accesses,
                ..h
            };
        }
        true
    }
}

impl AddressSpace {
    /// Remove `[start, start+nr)` from every VMA it overlaps, splitting VMAs and huge
    /// pages at its edges. `free(tier)` is called once per resident base page removed.
    /// Returns the kinds of the VMAs that were touched (empty: nothing was mapped).
    pub fn unmap(&mut self, start: Vpn, nr: u64, mut free: impl FnMut(u8)) -> Vec<VmaKind> {
        let end = start + nr;
        let mut kinds = Vec::new();
        let mut out = Vec::with_capacity(self.vmas.len() + 1);
        for mut v in std::mem::take(&mut self.vmas) {
            let (vs, ve) = (v.vma.start_vpn, v.vma.end_vpn());
            if ve <= start || vs >= end {
                out.push(v);
                continue;
            }
            kinds.push(v.vma.kind);
            let cut_start = start.max(vs);
            let cut_end = end.min(ve);
            // Huge pages straddling the cut are split first, as the kernel splits a PMD.
            for edge in [cut_start, cut_end - 1] {
                let i = (edge - vs) as usize;
                if v.pages[i].huge() {
                    let head = huge_head(edge);
                    if head < cut_start || head + SUBPAGES_PER_HUGE > cut_end {
                        v.split_unit(edge);
                    }
                }
            }
            for p in &v.pages[(cut_start - vs) as usize..(cut_end - vs) as usize] {
                if p.present() {
                    free(p.tier());
                    self.rss_pages -= 1;
                }
            }
            let right_pages = v.pages.split_off((cut_end - vs) as usize);
            v.pages.truncate((cut_start - vs) as usize);
            if !v.pages.is_empty() {
                v.vma.nr_pages = v.pages.len() as u64;
                out.push(v.clone());
            }
            if !right_pages.is_empty() {
                out.push(VmaState {
                    vma: Vma {
                        start_vpn: cut_end,
                        nr_pages: right_pages.len() as u64,
                        kind: v.vma.kind,
                    },
                    pages: right_pages,
                    strata: v.strata,
                });
            }
        }
        self.vmas = out;
        self.last = 0;
        kinds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vma(start: Vpn, nr: u64) -> Vma {
        Vma {
            start_vpn: start,
            nr_pages: nr,
            kind: VmaKind::Anon,
        }
    }

    #[test]
    fn empty_page_state_is_all_zero_bytes() {
        // `empty_pages` takes its arrays zeroed from the allocator on this premise.
        // SAFETY: PageState is 16 bytes of plain integers (`repr(C)`, no padding:
        // 8 + 4 + 1 + 1 + 2), so every byte of it is initialised.
        let bytes: [u8; 16] = unsafe { std::mem::transmute(PageState::EMPTY) };
        assert_eq!(bytes, [0; 16]);
        for keeps_one_in in [1, 64, 256] {
            let pages = empty_pages(3000, keeps_one_in);
            assert_eq!(pages.len(), 3000);
            assert!(pages.iter().all(|p| *p == PageState::EMPTY && !p.present()));
        }
        assert!(empty_pages(0, 1).is_empty());
    }

    #[test]
    fn a_pages_tier_round_trips_and_not_present_is_not_resident() {
        let mut p = PageState::EMPTY;
        assert_eq!(p.tier(), NOT_PRESENT);
        for t in [0, 1, 7, NOT_PRESENT - 1] {
            p.set_tier(t);
            assert_eq!(p.tier(), t);
            assert!(p.present());
        }
        p.set_tier(NOT_PRESENT);
        assert!(!p.present());
        assert_eq!(p, PageState::EMPTY);
        assert_eq!(PageState::resident(2, F_HUGE).tier(), 2);
        assert!(PageState::resident(0, 0).present());
    }

    #[test]
    fn unmap_middle_splits_vma_and_frees_resident_pages() {
        let mut a = AddressSpace::default();
        a.insert(vma(1000, 100), MappingStrata::BY_ADDRESS, 1)
            .unwrap();
        for p in &mut a.vmas[0].pages[10..30] {
            p.set_tier(0);
        }
        a.rss_pages = 20;
        let mut freed = 0;
        a.unmap(1015, 10, |_| freed += 1);
        assert_eq!(freed, 10);
        assert_eq!(a.rss_pages, 10);
        assert_eq!(a.vmas.len(), 2);
        assert_eq!(a.vmas[0].vma, vma(1000, 15));
        assert_eq!(a.vmas[1].vma, vma(1025, 75));
        assert!(a.find(1020).is_none());
        assert!(a.find(1026).is_some());
    }

    #[test]
    fn overlapping_mmap_is_rejected() {
        let mut a = AddressSpace::default();
        a.insert(vma(0, 10), MappingStrata::BY_ADDRESS, 1).unwrap();
        assert!(a.insert(vma(5, 10), MappingStrata::BY_ADDRESS, 1).is_err());
        assert!(a.insert(vma(10, 10), MappingStrata::BY_ADDRESS, 1).is_ok());
    }

    #[test]
    fn split_keeps_tier_and_written_bits_per_subpage() {
        let mut a = AddressSpace::default();
        a.insert(vma(512, 1024), MappingStrata::BY_ADDRESS, 1)
            .unwrap();
        let v = &mut a.vmas[0];
        for p in &mut v.pages[0..512] {
            p.set_tier(1);
            p.flags = F_HUGE;
        }
        v.pages[0].flags |= F_ACCESSED;
        v.pages[7].flags |= F_WRITTEN;
        assert_eq!(v.unit_index(512 + 7), 0);
        assert!(v.split_unit(512 + 300));
        assert!(v.pages.iter().take(512).all(|p| p.tier() == 1 && !p.huge()));
        assert!(v.pages.iter().take(512).all(|p| p.flags & F_ACCESSED != 0));
        assert_eq!(v.pages[7].flags & F_WRITTEN, F_WRITTEN);
        assert_eq!(v.pages[8].flags & F_WRITTEN, 0);
        assert_eq!(v.unit_index(512 + 7), 7);
    }
}
