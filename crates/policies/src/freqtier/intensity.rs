//! The dynamic tiering intensity state machine (§V-B2).

/// What the tiering thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sampling at `sampling_levels_hz[level]` and tiering (PROMOTING/DEMOTING).
    Sampling {
        /// Index into the sampling levels; 0 is the fastest.
        level: usize,
    },
    /// Low-overhead monitoring: accesses are only counted by tier.
    Monitoring,
}

/// Why monitoring mode was entered (§V-B2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonitorReason {
    /// Stable hit ratio at the slowest sampling level.
    StableAtSlowest,
    /// No page promoted in the window.
    PromotionPlateau,
    /// A full demotion pass found no cold page.
    EmptyDemotionScan,
}

/// The outcome of one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Too few samples to judge; nothing changes.
    Idle,
    /// Stay as is.
    Keep,
    /// Sample one level slower.
    Lower {
        /// The new level.
        to: usize,
    },
    /// Sample one level faster.
    Raise {
        /// The new level.
        to: usize,
    },
    /// Stop sampling; only count.
    EnterMonitoring(MonitorReason),
    /// The hit ratio moved while monitoring: restart at the top level.
    LeaveMonitoring,
}

/// What one window (or monitoring check) observed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// Samples served by the fast tier.
    pub fast_samples: u64,
    /// Samples served by slower tiers.
    pub slow_samples: u64,
    /// Pages promoted in the window.
    pub promoted_pages: u64,
    /// A demotion round in the window completed a full pass finding no cold page.
    pub empty_demotion_scan: bool,
}

/// Parameters of [`Intensity`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntensityParams {
    /// Number of sampling levels.
    pub nr_levels: usize,
    /// Stability tolerance, as a fraction (0.005 = 0.5 points).
    pub tolerance: f64,
    /// Widen the tolerance to this many standard errors of the difference.
    pub noise_z: f64,
    /// Windows with fewer samples are not judged.
    pub min_samples: u64,
}

/// The dynamic tiering intensity of §V-B2 (spec §2.8 pseudo-code).
///
/// Sampling, per window: no promotion → monitoring (plateau); empty demotion scan →
/// monitoring; stable at the slowest level → monitoring; stable → one level slower;
/// unstable → one level faster. Monitoring, per check: unstable → sampling at the
/// top level. "Stable" compares the window's hit ratio with the previous one's; the
/// first window after a mode change has nothing to compare with (sampling: unstable;
/// monitoring: it sets the baseline).
#[derive(Debug, Clone)]
pub struct Intensity {
    p: IntensityParams,
    mode: Mode,
    prev: Option<(f64, u64)>,
}

impl Intensity {
    /// Start sampling at the top level.
    pub fn new(p: IntensityParams) -> Intensity {
        Intensity {
            p,
            mode: Mode::Sampling { level: 0 },
            prev: None,
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The tolerance for hit ratios `a` (of `na` samples) and `b` (of `nb`).
    pub fn tolerance(&self, a: f64, na: u64, b: f64, nb: u64) -> f64 {
        let var = a * (1.0 - a) / na.max(1) as f64 + b * (1.0 - b) / nb.max(1) as f64;
        self.p.tolerance.max(self.p.noise_z * var.sqrt())
    }

    /// Judge one window and move to the next mode.
    pub fn observe(&mut self, w: &WindowStats) -> Decision {
        let n = w.fast_samples + w.slow_samples;
        if n < self.p.min_samples.max(1) {
            return Decision::Idle;
        }
        let hr = w.fast_samples as f64 / n as f64;
        let stable = self
            .prev
            .map(|(p, pn)| (hr - p).abs() <= self.tolerance(hr, n, p, pn));
        self.prev = Some((hr, n));
        let d = match self.mode {
            Mode::Sampling { level } => {
                let slowest = level + 1 >= self.p.nr_levels;
                if w.promoted_pages == 0 {
                    Decision::EnterMonitoring(MonitorReason::PromotionPlateau)
                } else if w.empty_demotion_scan {
                    Decision::EnterMonitoring(MonitorReason::EmptyDemotionScan)
                } else if stable == Some(true) && slowest {
                    Decision::EnterMonitoring(MonitorReason::StableAtSlowest)
                } else if stable == Some(true) {
                    Decision::Lower { to: level + 1 }
                } else if level > 0 {
                    Decision::Raise { to: level - 1 }
                } else {
                    Decision::Keep
                }
            }
            Mode::Monitoring => match stable {
                Some(false) => Decision::LeaveMonitoring,
                _ => Decision::Keep,
            },
        };
        match d {
            Decision::Lower { to } | Decision::Raise { to } => {
                self.mode = Mode::Sampling { level: to }
            }
            Decision::EnterMonitoring(_) => {
                self.mode = Mode::Monitoring;
                self.prev = None;
            }
            Decision::LeaveMonitoring => {
                self.mode = Mode::Sampling { level: 0 };
                self.prev = None;
            }
            Decision::Idle | Decision::Keep => {}
        }
        d
    }
}
