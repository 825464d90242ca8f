//! `all-fast`: an unbounded fast tier. Not a tiering system but the reference every
//! slowdown is measured against: the machine sizes the fast tier to hold the whole
//! footprint, and the policy never acts.

use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// `all-fast` has no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllFastConfig {}

/// The policy.
pub struct AllFast;

impl Policy for AllFast {
    fn name(&self) -> &'static str {
        "all-fast"
    }
    fn requirements(&self) -> Requirements {
        Requirements {
            unbounded_fast_tier: true,
            ..Default::default()
        }
    }
    fn on_event(&mut self, _event: &Event, _mech: &mut dyn Mechanisms) {}
}

/// The registry's view of [`AllFastConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for AllFastConfig {
    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(AllFast)
    }
}
