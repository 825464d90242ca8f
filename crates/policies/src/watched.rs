//! Test support: a policy run with a hook around each of its events, so that a test
//! can check the policy's state or its moves as the run goes, and with extra
//! end-of-run statistics read from its state.

use tierkit_core::{Event, Mechanisms, Policy, Requirements};

type Hook<P> = Box<dyn FnMut(&mut P, &Event, &mut dyn Mechanisms) + Send>;

/// `P`, every event of which goes through a hook; the rest is `P`'s own.
pub(crate) struct Watched<P> {
    inner: P,
    hook: Hook<P>,
    probe: fn(&P) -> Vec<(&'static str, f64)>,
}

impl<P: Policy> Watched<P> {
    /// `inner` with every event handed to `hook`, which must pass it on
    /// (`policy.on_event(event, mech)`) and may look before and after.
    pub(crate) fn new(
        inner: P,
        hook: impl FnMut(&mut P, &Event, &mut dyn Mechanisms) + Send + 'static,
    ) -> Self {
        Watched {
            inner,
            hook: Box::new(hook),
            probe: |_| Vec::new(),
        }
    }

    /// `inner` unchanged, but for `probe`'s statistics after its own at the end of the
    /// run (the engine asks for `stats` once the run is over).
    pub(crate) fn probed(inner: P, probe: fn(&P) -> Vec<(&'static str, f64)>) -> Self {
        Watched {
            probe,
            ..Self::new(inner, |p, event, mech| p.on_event(event, mech))
        }
    }
}

impl<P: Policy> Policy for Watched<P> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn requirements(&self) -> Requirements {
        self.inner.requirements()
    }
    fn init(&mut self, mech: &mut dyn Mechanisms) {
        self.inner.init(mech)
    }
    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        (self.hook)(&mut self.inner, event, mech)
    }
    fn metadata_bytes(&self) -> u64 {
        self.inner.metadata_bytes()
    }
    fn stats(&self) -> Vec<(&'static str, f64)> {
        let mut s = self.inner.stats();
        s.extend((self.probe)(&self.inner));
        s
    }
}
