//! The coalescing batch of samples (§IV-C, §V-C-c).

use super::*;

/// One page's samples in the current batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry {
    /// Process.
    pub pid: Pid,
    /// Page (the head of a huge page).
    pub vpn: Vpn,
    /// Samples of it in the batch.
    pub count: u32,
    /// Tier that served its latest sample.
    pub tier: TierId,
    /// Part of a huge page.
    pub huge: bool,
}

/// The batch being collected: a hash table from page to samples (the paper's
/// coalescing table), iterated in first-sample order for determinism.
#[derive(Debug, Default)]
pub struct Batch {
    index: HashMap<(Pid, Vpn), usize>,
    entries: Vec<BatchEntry>,
    nr_samples: u64,
}

impl Batch {
    /// Add one sample.
    pub fn add(&mut self, pid: Pid, vpn: Vpn, tier: TierId, huge: bool) {
        self.nr_samples += 1;
        match self.index.get(&(pid, vpn)) {
            Some(&i) => {
                let e = &mut self.entries[i];
                e.count += 1;
                e.tier = tier;
            }
            None => {
                self.index.insert((pid, vpn), self.entries.len());
                self.entries.push(BatchEntry {
                    pid,
                    vpn,
                    count: 1,
                    tier,
                    huge,
                });
            }
        }
    }

    /// Samples in the batch.
    pub fn nr_samples(&self) -> u64 {
        self.nr_samples
    }

    /// Distinct pages in the batch.
    pub fn nr_pages(&self) -> usize {
        self.entries.len()
    }

    /// Hand over the entries (first-sample order) and start a new batch.
    pub fn take(&mut self) -> Vec<BatchEntry> {
        self.index.clear();
        self.nr_samples = 0;
        std::mem::take(&mut self.entries)
    }
}
