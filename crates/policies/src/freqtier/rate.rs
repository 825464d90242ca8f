//! Sampling rate → sampling period, as perf's frequency mode (§V-B2).

use super::*;

/// Turns a sampling *rate* into the machine's sampling *period*, like perf's
/// frequency mode: the event rate is estimated from the samples of the last tick
/// times the period that produced them, and `period = events_per_s / target_rate`,
/// bounded to [`MIN_SAMPLE_PERIOD`, `MAX_SAMPLE_PERIOD`].
#[derive(Debug, Clone)]
pub struct RateController {
    period: u64,
    samples: u64,
    since: Nanos,
    events_per_s: Option<f64>,
}

impl RateController {
    /// A controller starting at `period`, at time `now`.
    pub fn new(period: u64, now: Nanos) -> RateController {
        RateController {
            period,
            samples: 0,
            since: now,
            events_per_s: None,
        }
    }

    /// The period to program.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The last event-rate estimate, events per second.
    pub fn events_per_s(&self) -> Option<f64> {
        self.events_per_s
    }

    /// One sample arrived.
    pub fn on_sample(&mut self) {
        self.samples += 1;
    }

    fn clamp(p: f64) -> u64 {
        (p.round() as u64).clamp(MIN_SAMPLE_PERIOD, MAX_SAMPLE_PERIOD)
    }

    /// End of a tick at `now`: re-estimate the event rate and derive the period for
    /// `target_hz`. With no sample in the tick the rate is below `period / tick`, so
    /// the period is halved (perf lowers it the same way when events are rare).
    pub fn tick(&mut self, now: Nanos, target_hz: f64) -> u64 {
        let dt_s = now.saturating_sub(self.since) as f64 / NS_PER_SEC as f64;
        if dt_s <= 0.0 {
            return self.period;
        }
        if self.samples > 0 {
            let rate = (self.samples * self.period) as f64 / dt_s;
            self.events_per_s = Some(rate);
            self.period = Self::clamp(rate / target_hz);
        } else {
            self.period = Self::clamp(self.period as f64 / 2.0);
        }
        self.samples = 0;
        self.since = now;
        self.period
    }

    /// The target rate changed (a new intensity level): apply it at once from the
    /// last estimate, and start a fresh measurement.
    pub fn retarget(&mut self, now: Nanos, target_hz: f64) -> u64 {
        if let Some(rate) = self.events_per_s {
            self.period = Self::clamp(rate / target_hz);
        }
        self.samples = 0;
        self.since = now;
        self.period
    }
}
