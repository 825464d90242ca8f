//! A tiny deterministic bump "allocator" for a workload's virtual address space.
//!
//! Generated workloads never run, so they need no real allocator: they only need
//! addresses that look like what a real process would get. glibc serves every large
//! `malloc` (above `M_MMAP_THRESHOLD`, 128 KiB by default) with its own anonymous
//! `mmap`, so each big array of a benchmark is a VMA of its own. [`Layout`] mimics
//! that: each [`Layout::map`] returns a fresh range, 2 MiB aligned so that the huge-page
//! machinery (THP, PET's P-blocks) sees the same alignment as with a real
//! THP-friendly allocation, and separated from the previous range by an unmapped
//! guard gap, because Linux merges adjacent anonymous mappings with identical flags
//! into one VMA and the arrays would stop being distinguishable.

use tierkit_core::{Op, VmaKind, GIB, HUGE_PAGE_SIZE, PAGE_SIZE};

/// First address handed out. Low enough that every address fits comfortably in the
/// 47-bit user address space even for multi-TiB footprints, high enough to stay clear
/// of the (imaginary) program text and brk heap below it.
pub const LAYOUT_BASE: u64 = GIB;

/// Unmapped bytes left between consecutive mappings so they stay separate VMAs.
pub const GUARD_GAP_BYTES: u64 = HUGE_PAGE_SIZE;

/// One mapping handed out by a [`Layout`]: `[addr, addr + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// Start address (2 MiB aligned).
    pub addr: u64,
    /// Length in bytes (a multiple of the 4 KiB page size, > 0).
    pub len: u64,
    /// Anonymous or file-backed.
    pub kind: VmaKind,
}

impl Mapping {
    /// One past the last byte of the mapping.
    #[inline]
    pub fn end(&self) -> u64 {
        self.addr + self.len
    }

    /// True if `addr` lies inside the mapping.
    #[inline]
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.addr && addr < self.end()
    }

    /// The `Op::Mmap` that creates this mapping, for a workload's prologue.
    pub fn mmap_op(&self) -> Op {
        Op::Mmap {
            addr: self.addr,
            len: self.len,
            kind: self.kind,
        }
    }
}

/// A deterministic bump allocator of virtual address ranges (see the module docs).
#[derive(Debug, Clone)]
pub struct Layout {
    next: u64,
}

impl Default for Layout {
    fn default() -> Self {
        Self::new()
    }
}

impl Layout {
    /// A layout whose first mapping starts at [`LAYOUT_BASE`].
    pub fn new() -> Self {
        Layout { next: LAYOUT_BASE }
    }

    /// Hand out a new mapping of at least `bytes` bytes (rounded up to whole 4 KiB
    /// pages, minimum one page), starting at the next 2 MiB boundary.
    pub fn map(&mut self, bytes: u64, kind: VmaKind) -> Mapping {
        let len = page_round_up(bytes.max(1));
        let addr = align_up(self.next, HUGE_PAGE_SIZE);
        self.next = addr + len + GUARD_GAP_BYTES;
        Mapping { addr, len, kind }
    }
}

/// Round `bytes` up to a whole number of 4 KiB pages.
#[inline]
pub fn page_round_up(bytes: u64) -> u64 {
    align_up(bytes, PAGE_SIZE)
}

/// Round `x` up to a multiple of `align` (a power of two).
#[inline]
fn align_up(x: u64, align: u64) -> u64 {
    debug_assert!(align.is_power_of_two());
    (x + align - 1) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_aligned_disjoint_and_separated() {
        let mut l = Layout::new();
        let a = l.map(3 * PAGE_SIZE + 1, VmaKind::Anon);
        let b = l.map(HUGE_PAGE_SIZE, VmaKind::Anon);
        let c = l.map(0, VmaKind::File);
        assert_eq!(a.addr, LAYOUT_BASE);
        assert_eq!(a.len, 4 * PAGE_SIZE);
        for m in [a, b, c] {
            assert_eq!(m.addr % HUGE_PAGE_SIZE, 0);
            assert_eq!(m.len % PAGE_SIZE, 0);
            assert!(m.len > 0);
        }
        // A guard gap between consecutive mappings keeps them separate VMAs.
        assert!(b.addr >= a.end() + GUARD_GAP_BYTES);
        assert!(c.addr >= b.end() + GUARD_GAP_BYTES);
        assert_eq!(c.kind, VmaKind::File);
    }

    #[test]
    fn layout_is_deterministic() {
        let mut l1 = Layout::new();
        let mut l2 = Layout::new();
        for bytes in [1, 5 << 20, 123_456_789] {
            assert_eq!(l1.map(bytes, VmaKind::Anon), l2.map(bytes, VmaKind::Anon));
        }
    }
}
