//! PET's demotion state machine (PET §4.2, Fig. 7, Fig. 8), evaluated once per scan
//! interval, without the machine.
//!
//! ```text
//!            cold window                cold > accessed              cold > accessed
//!  NORMAL ───────────────▶ PHASE1 ──────────────────────▶ PHASE2 ──────────────────────▶ split:
//!    ▲  (split into temps)   │      (10% canaries demoted   │      accessed runs → NORMAL
//!    │                       │       and armed)             │      cold runs     → DEMOTED
//!    └──── cold ≤ accessed ──┴──────────────────────────────┘
//!    ▲                                                                       │
//!    └──────────────── promotion by kpromoted (canary-fault budget) ─────────┘
//! ```
//!
//! The two "cold ≤ accessed" arrows back to NORMAL and the tie rule (only a strictly
//! larger cold size advances) are tierkit decisions where the paper is silent
//! (spec §2.3 [unspecified]); see `docs/policies/pet.md`.

use super::pblock::{runs, Run, Span};

/// The state of a P-block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Sampled as one unit, in the fast tier.
    Normal,
    /// Cold once: sampled per temporary block.
    Phase1,
    /// Cold twice: canaries demoted and armed; last check before demotion.
    Phase2,
    /// Demoted; only its canaries' faults are watched (§4.3).
    Demoted,
}

/// What a scan-interval evaluation decides for one P-block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Nothing changes.
    Stay,
    /// NORMAL → PHASE1: split into temporary blocks.
    EnterPhase1,
    /// PHASE1 → PHASE2: demote and arm canaries.
    EnterPhase2,
    /// PHASE1/PHASE2 → NORMAL: the block is not cold after all (PHASE2: its canaries
    /// are promoted back).
    BackToNormal,
    /// PHASE2 resolution: split into these runs; accessed runs become NORMAL P-blocks
    /// (canaries promoted), cold runs DEMOTED P-blocks (fully demoted).
    Resolve(Vec<Run>),
}

/// Σ size of cold temporary blocks and Σ size of accessed ones, in pages.
pub fn cold_and_accessed_pages(temps: &[(Span, bool)]) -> (u64, u64) {
    temps.iter().fold((0, 0), |(c, a), &(s, acc)| {
        if acc {
            (c, a + s.nr_pages)
        } else {
            (c + s.nr_pages, a)
        }
    })
}

/// PET §4.2: "If the total size of cold blocks is larger than that of accessed
/// blocks" — strictly larger.
pub fn mostly_cold(temps: &[(Span, bool)]) -> bool {
    let (cold, accessed) = cold_and_accessed_pages(temps);
    cold > accessed
}

/// The transition of a block in `state` at a scan tick. `unit_accessed` is the NORMAL
/// unit's window flag; `temps` the temporary blocks' `(span, accessed)` (PHASE1/2);
/// `has_resident` false for a block none of whose pages was ever touched (it holds
/// no memory, so it is never cold — tierkit decision).
pub fn evaluate(
    state: State,
    unit_accessed: bool,
    temps: &[(Span, bool)],
    has_resident: bool,
) -> Transition {
    match state {
        State::Normal if unit_accessed || !has_resident => Transition::Stay,
        State::Normal => Transition::EnterPhase1,
        State::Phase1 if mostly_cold(temps) => Transition::EnterPhase2,
        State::Phase2 if mostly_cold(temps) => Transition::Resolve(runs(temps)),
        State::Phase1 | State::Phase2 => Transition::BackToNormal,
        State::Demoted => Transition::Stay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pet::pblock::split;
    use tierkit_core::*;

    const MIB_PAGES: u64 = MIB / PAGE_SIZE;

    fn temps(size_mib: u64, accessed: &[usize]) -> Vec<(Span, bool)> {
        split(
            Span {
                start: 0,
                nr_pages: size_mib * MIB_PAGES,
            },
            128 * MIB_PAGES,
        )
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, accessed.contains(&i)))
        .collect()
    }

    #[test]
    fn normal_goes_to_phase1_only_after_a_window_without_access() {
        assert_eq!(evaluate(State::Normal, true, &[], true), Transition::Stay);
        assert_eq!(
            evaluate(State::Normal, false, &[], true),
            Transition::EnterPhase1
        );
        // Nothing resident: nothing to demote.
        assert_eq!(evaluate(State::Normal, false, &[], false), Transition::Stay);
    }

    #[test]
    fn oracle_09_phase1_advances_only_when_cold_size_strictly_exceeds_accessed_size() {
        // 1 GiB, 3 of 8 temps accessed: 640 MiB cold > 384 MiB accessed.
        let t = temps(1024, &[0, 3, 7]);
        assert_eq!(
            cold_and_accessed_pages(&t),
            (640 * MIB_PAGES, 384 * MIB_PAGES)
        );
        assert_eq!(
            evaluate(State::Phase1, false, &t, true),
            Transition::EnterPhase2
        );
        // 4 of 8: a tie goes back to NORMAL (spec oracle 9: strictly greater).
        let t = temps(1024, &[0, 1, 2, 3]);
        assert_eq!(
            evaluate(State::Phase1, false, &t, true),
            Transition::BackToNormal
        );
        // Sizes, not counts: 200 MiB = [128 accessed][72 cold] → back to NORMAL;
        // [128 cold][72 accessed] → PHASE2.
        assert_eq!(
            evaluate(State::Phase1, false, &temps(200, &[0]), true),
            Transition::BackToNormal
        );
        assert_eq!(
            evaluate(State::Phase1, false, &temps(200, &[1]), true),
            Transition::EnterPhase2
        );
    }

    #[test]
    fn oracle_11_mixed_1gib_block_resolves_into_256mib_normal_and_768mib_demoted() {
        // Spec oracle 11 (Fig. 7-(c), Fig. 8): first 256 MiB hot, the rest idle.
        let t = temps(1024, &[0, 1]);
        let Transition::Resolve(r) = evaluate(State::Phase2, false, &t, true) else {
            panic!("a mostly cold PHASE2 block resolves");
        };
        assert_eq!(r.len(), 2);
        assert!(r[0].accessed && !r[1].accessed);
        assert_eq!(r[0].span.nr_pages, 256 * MIB_PAGES);
        assert_eq!(r[1].span.nr_pages, 768 * MIB_PAGES);
        assert_eq!(r[1].span.start, 256 * MIB_PAGES);
        // A fully idle block resolves into one DEMOTED run.
        let Transition::Resolve(r) = evaluate(State::Phase2, false, &temps(1024, &[]), true) else {
            panic!()
        };
        assert_eq!(r.len(), 1);
        assert!(!r[0].accessed);
        // PHASE2 not mostly cold: back to NORMAL.
        assert_eq!(
            evaluate(State::Phase2, false, &temps(1024, &[0, 2, 4, 6, 7]), true),
            Transition::BackToNormal
        );
        assert_eq!(evaluate(State::Demoted, false, &[], true), Transition::Stay);
    }

    /// Spec oracle 10 on the pure machine: a block accessed in scan window j and idle
    /// from then on is PHASE1 at the end of j+1, PHASE2 (canaries demoted) at the end
    /// of j+2 and DEMOTED at the end of j+3 — with 10 s windows, canaries 20–30 s and
    /// the bulk 30–40 s after the last access, and nothing sooner.
    #[test]
    fn oracle_10_a_block_idle_after_window_j_is_demoted_at_the_end_of_window_j_plus_3() {
        let mut state = State::Normal;
        let mut history = Vec::new();
        for window in 0..8 {
            let accessed = window <= 2; // last access in window j = 2
            let t = temps(512, &[]);
            let tr = evaluate(state, accessed, &t, true);
            state = match tr {
                Transition::Stay => state,
                Transition::EnterPhase1 => State::Phase1,
                Transition::EnterPhase2 => State::Phase2,
                Transition::BackToNormal => State::Normal,
                Transition::Resolve(r) => {
                    assert!(r.iter().all(|r| !r.accessed));
                    State::Demoted
                }
            };
            history.push(state);
        }
        use State::*;
        assert_eq!(
            history,
            vec![Normal, Normal, Normal, Phase1, Phase2, Demoted, Demoted, Demoted]
        );
    }
}
