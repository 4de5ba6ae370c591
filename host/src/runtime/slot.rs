//! The module a controller runs now. Every reconcile takes the module
//! current at its start and uses it throughout, so a module swapped in at
//! run time serves the next reconcile while reconciles in flight finish on
//! the one they started with.

use std::path::PathBuf;
use std::sync::Arc;

use super::logic_module::LogicModule;

#[derive(Clone)]
pub struct ModuleSlot {
    active: Arc<arc_swap::ArcSwap<LogicModule>>,
    /// The file it was loaded from, watched for a new version.
    file: Option<PathBuf>,
    allow_precompiled: bool,
}

impl ModuleSlot {
    pub fn new(module: LogicModule) -> Self {
        Self { active: Arc::new(arc_swap::ArcSwap::from_pointee(module)), file: None, allow_precompiled: false }
    }

    /// A module whose file is watched: replacing the file offers the new
    /// version for a verified swap.
    pub fn watching(module: LogicModule, file: PathBuf, allow_precompiled: bool) -> Self {
        Self { file: Some(file), allow_precompiled, ..Self::new(module) }
    }

    pub fn current(&self) -> Arc<LogicModule> {
        self.active.load_full()
    }

    /// Makes `module` the one every later reconcile runs on; answers the one
    /// it replaced.
    pub fn swap(&self, module: Arc<LogicModule>) -> Arc<LogicModule> {
        self.active.swap(module)
    }

    pub fn file(&self) -> Option<&PathBuf> {
        self.file.as_ref()
    }

    pub fn allow_precompiled(&self) -> bool {
        self.allow_precompiled
    }
}
