//! Units and identifiers. Names carry units: `_ns`, `_bytes`, `nr_`.

use serde::{Deserialize, Serialize};

/// Simulated (or wall-clock, live) time in nanoseconds since the run started.
pub type Nanos = u64;
/// A virtual page number: a virtual address shifted right by [`PAGE_SHIFT`].
pub type Vpn = u64;

/// log2 of the base page size.
pub const PAGE_SHIFT: u32 = 12;
/// Base page size in bytes (4 KiB).
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// log2 of the huge (PMD-mapped) page size.
pub const HUGE_PAGE_SHIFT: u32 = 21;
/// Huge page size in bytes (2 MiB).
pub const HUGE_PAGE_SIZE: u64 = 1 << HUGE_PAGE_SHIFT;
/// Base pages per huge page (512).
pub const SUBPAGES_PER_HUGE: u64 = HUGE_PAGE_SIZE / PAGE_SIZE;
/// Cache line size in bytes; the unit of LLC filtering and bandwidth accounting.
pub const CACHE_LINE: u64 = 64;

/// One nanosecond-based millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;
/// Bytes per MiB.
pub const MIB: u64 = 1 << 20;
/// Bytes per GiB.
pub const GIB: u64 = 1 << 30;

/// The first page of the huge page that contains `vpn`.
#[inline]
pub fn huge_head(vpn: Vpn) -> Vpn {
    vpn & !(SUBPAGES_PER_HUGE - 1)
}

/// Bits of a [`page_key`] that hold the page number: a 57-bit virtual address (five
/// page-table levels) has 45-bit page numbers, so 48 leave room.
pub const PAGE_KEY_VPN_BITS: u32 = 48;

/// One `u64` naming page `vpn` of process `pid`: the process in the top bits, the
/// page number below. Keys sort by `(pid, vpn)`. Policies that keep pages in sorted
/// arrays or hash them (DAMON's frames, FreqTier's trackers) use this one packing.
#[inline]
pub fn page_key(pid: Pid, vpn: Vpn) -> u64 {
    debug_assert!(vpn < 1 << PAGE_KEY_VPN_BITS);
    ((pid.0 as u64) << PAGE_KEY_VPN_BITS) | vpn
}

/// The `(pid, vpn)` of a [`page_key`].
#[inline]
pub fn page_key_parts(key: u64) -> (Pid, Vpn) {
    (
        Pid((key >> PAGE_KEY_VPN_BITS) as u32),
        key & ((1 << PAGE_KEY_VPN_BITS) - 1),
    )
}

/// A memory tier. Tier 0 is the fastest; higher ids are slower.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TierId(pub u8);

impl TierId {
    /// The fast tier (DRAM).
    pub const FAST: TierId = TierId(0);
    /// The tier as an index into per-tier arrays.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
    /// True for the fastest tier.
    #[inline]
    pub fn is_fast(self) -> bool {
        self.0 == 0
    }
}

/// A process (address space). Ids are dense, starting at 0, in workload order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pid(pub u32);

impl Pid {
    /// The process as an index into per-process arrays.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_keys_round_trip_and_sort_by_process_then_page() {
        let max_vpn = (1 << 45) - 1; // a 57-bit address space's last page
        for (pid, vpn) in [
            (0, 0),
            (0, max_vpn),
            (1, 0),
            (7, 12345),
            (u16::MAX as u32, 9),
        ] {
            assert_eq!(page_key_parts(page_key(Pid(pid), vpn)), (Pid(pid), vpn));
        }
        assert!(page_key(Pid(0), max_vpn) < page_key(Pid(1), 0));
        assert!(page_key(Pid(3), 5) < page_key(Pid(3), 6));
    }
}
