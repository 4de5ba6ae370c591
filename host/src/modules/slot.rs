//! The module a controller runs now. Every reconcile takes the module
//! current at its start and uses it throughout, so a module swapped in at
//! run time serves the next reconcile while reconciles in flight finish on
//! the one they started with.

use std::sync::Arc;

use super::logic_module::LogicModule;

#[derive(Clone)]
pub struct ModuleSlot(Arc<arc_swap::ArcSwap<LogicModule>>);

impl ModuleSlot {
    pub fn new(module: LogicModule) -> Self {
        Self(Arc::new(arc_swap::ArcSwap::from_pointee(module)))
    }

    pub fn current(&self) -> Arc<LogicModule> {
        self.0.load_full()
    }

    /// Replaces the module for every later reconcile.
    pub fn swap(&self, module: LogicModule) {
        self.0.store(Arc::new(module));
    }
}
