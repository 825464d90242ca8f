//! ksampled's CPU-budget controller for the PEBS periods (MEMTIS §4.1.1). Pure logic.
//!
//! Every check, ksampled's CPU share over the window just ended is blended into an
//! exponential moving average; when the average is more than the hysteresis above the
//! budget both periods move one step up their ladders (fewer samples), when it is more
//! than the hysteresis below they move one step down (§4.1.1: 3% of a core, ±0.5%).
//! The ladders and the one-step-per-check rule come from the artifact
//! (`htmm_sampler.c`); the paper gives neither.

/// Adapts the load-miss and store sampling periods to a CPU budget.
#[derive(Debug, Clone)]
pub struct PeriodController {
    load_ladder: Vec<u64>,
    store_ladder: Vec<u64>,
    step: usize,
    budget_pct: f64,
    hysteresis_pct: f64,
    ema_new_weight: f64,
    usage_pct: Option<f64>,
    last_window_pct: f64,
    nr_up: u64,
    nr_down: u64,
}

/// What one check decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeriodChange {
    /// Usage inside the band, or already at the end of the ladder.
    Unchanged,
    /// Periods lengthened (usage above budget + hysteresis).
    Up,
    /// Periods shortened (usage below budget − hysteresis).
    Down,
}

impl PeriodController {
    /// A controller at the first step of both ladders (the initial periods).
    /// Ladders must be non-empty; the store ladder is clamped at its last step while
    /// the load ladder goes on (the artifact moves both together).
    pub fn new(
        load_ladder: Vec<u64>,
        store_ladder: Vec<u64>,
        budget_pct: f64,
        hysteresis_pct: f64,
        ema_new_weight: f64,
    ) -> PeriodController {
        assert!(!load_ladder.is_empty() && !store_ladder.is_empty());
        PeriodController {
            load_ladder,
            store_ladder,
            step: 0,
            budget_pct,
            hysteresis_pct,
            ema_new_weight,
            usage_pct: None,
            last_window_pct: 0.0,
            nr_up: 0,
            nr_down: 0,
        }
    }

    fn max_step(&self) -> usize {
        self.load_ladder.len().max(self.store_ladder.len()) - 1
    }

    /// The current LLC-load-miss period, events per sample.
    pub fn load_period(&self) -> u64 {
        self.load_ladder[self.step.min(self.load_ladder.len() - 1)]
    }

    /// The current store period, events per sample.
    pub fn store_period(&self) -> u64 {
        self.store_ladder[self.step.min(self.store_ladder.len() - 1)]
    }

    /// The smoothed sampler CPU, percent of one core (0 before the first check).
    pub fn usage_pct(&self) -> f64 {
        self.usage_pct.unwrap_or(0.0)
    }

    /// The raw share of the last window, percent of one core.
    pub fn last_window_pct(&self) -> f64 {
        self.last_window_pct
    }

    /// Steps taken up and down so far.
    pub fn steps(&self) -> (u64, u64) {
        (self.nr_up, self.nr_down)
    }

    /// Feed one window: the sampler spent `cpu_ns` over `window_ns` of time. Returns
    /// what changed; read the new periods from [`load_period`](Self::load_period) and
    /// [`store_period`](Self::store_period).
    pub fn update(&mut self, cpu_ns: f64, window_ns: f64) -> PeriodChange {
        if window_ns <= 0.0 {
            return PeriodChange::Unchanged;
        }
        let now_pct = 100.0 * cpu_ns / window_ns;
        self.last_window_pct = now_pct;
        let u = match self.usage_pct {
            None => now_pct,
            Some(old) => self.ema_new_weight * now_pct + (1.0 - self.ema_new_weight) * old,
        };
        self.usage_pct = Some(u);
        let old_period = self.load_period() as f64;
        let change = if u > self.budget_pct + self.hysteresis_pct && self.step < self.max_step() {
            self.step += 1;
            self.nr_up += 1;
            PeriodChange::Up
        } else if u < self.budget_pct - self.hysteresis_pct && self.step > 0 {
            self.step -= 1;
            self.nr_down += 1;
            PeriodChange::Down
        } else {
            return PeriodChange::Unchanged;
        };
        // The average described the old period; the next window measures the new one.
        // Rescale it by the change in sampling rate so the history does not push the
        // period one step past the budget (without this a 10% start settles at 700,
        // not 600, in the closed-loop test).
        self.usage_pct = Some(u * old_period / self.load_period() as f64);
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ladder() -> PeriodController {
        PeriodController::new(
            vec![200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400],
            vec![100_000, 300_000],
            3.0,
            0.5,
            0.8,
        )
    }

    /// Spec §7 oracle 25: the period rises above 3.5%, falls below 2.5%, and stays
    /// inside the band.
    #[test]
    fn oracle_25_hysteresis_band() {
        let mut c = ladder();
        assert_eq!((c.load_period(), c.store_period()), (200, 100_000));
        // 3.4% of a 1 s window: inside the band.
        assert_eq!(c.update(34e6, 1e9), PeriodChange::Unchanged);
        // Sustained 5%: the EMA crosses 3.5% and both ladders step up together.
        assert_eq!(c.update(50e6, 1e9), PeriodChange::Up);
        assert_eq!((c.load_period(), c.store_period()), (300, 300_000));
        // The store ladder is clamped at its end, the load ladder goes on.
        assert_eq!(c.update(50e6, 1e9), PeriodChange::Up);
        assert_eq!((c.load_period(), c.store_period()), (400, 300_000));
        // Back to 3%: the EMA settles inside the band, no change.
        c.update(30e6, 1e9);
        c.update(30e6, 1e9);
        assert_eq!(c.update(30e6, 1e9), PeriodChange::Unchanged);
        // 1%: below 2.5%, the period comes down.
        c.update(10e6, 1e9);
        assert_eq!(c.load_period(), 300);
        // At the bottom it stays.
        for _ in 0..5 {
            c.update(0.0, 1e9);
        }
        assert_eq!(c.load_period(), 200);
        assert_eq!(c.update(0.0, 1e9), PeriodChange::Unchanged);
    }

    /// Spec §7 oracle 25, closed loop: a sampler whose CPU is proportional to the
    /// sampling rate settles at the first period that keeps it within the budget.
    /// 100 M load misses/s at 200 ns per sample: period 200 costs 10% of a core; the
    /// cheapest period inside 3.5% is 600 (3.33%).
    #[test]
    fn oracle_25_closed_loop_holds_the_budget() {
        let mut c = ladder();
        let events_per_s = 100e6;
        let sample_ns = 200.0;
        let mut usages = Vec::new();
        for _ in 0..40 {
            let samples = events_per_s / c.load_period() as f64;
            c.update(samples * sample_ns, 1e9);
            usages.push(100.0 * samples * sample_ns / 1e9);
        }
        assert_eq!(c.load_period(), 600);
        let last = *usages.last().unwrap();
        assert!((2.5..=3.5).contains(&last), "settled at {last}%");
        // Once settled, every later window stays within the budget's band.
        assert!(usages[20..].iter().all(|&u| u <= 3.5), "{usages:?}");
        // A light workload (603.bwaves-like, §6.3.5) keeps the initial period.
        let mut c = ladder();
        for _ in 0..40 {
            let samples = 2e6 / c.load_period() as f64;
            c.update(samples * sample_ns, 1e9);
        }
        assert_eq!(c.load_period(), 200);
    }
}
