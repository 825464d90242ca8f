//! `first-touch`: static tiering. Pages go where the kernel's first-touch allocation
//! puts them (the fast tier while it has free pages above its min watermark, then the
//! slow tier) and never move. MULTI-CLOCK calls this "static tiering".

use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// `first-touch` has no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirstTouchConfig {}

/// The policy.
pub struct FirstTouch;

impl Policy for FirstTouch {
    fn name(&self) -> &'static str {
        "first-touch"
    }
    fn on_event(&mut self, _event: &Event, _mech: &mut dyn Mechanisms) {}
}

/// The registry's view of [`FirstTouchConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for FirstTouchConfig {
    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(FirstTouch)
    }
}
