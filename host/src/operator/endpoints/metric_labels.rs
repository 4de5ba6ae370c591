//! The label sets of the host's metrics (`metrics.rs`): one struct per
//! set of labels a family is keyed by.

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub module: String,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub module: String,
    pub kind: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub module: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FunctionLabels {
    pub module: String,
    pub function: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub module: String,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModuleLabels {
    pub module: String,
    pub version: String,
    pub digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwapLabels {
    pub module: String,
    /// succeeded, refused, rolled_back
    pub result: &'static str,
}

/// A difference a shadowed version's answer showed: the kind of the object
/// (the parent's kind for `status` and `fails`) and `create`, `update`,
/// `delete`, `unmanaged`, `status` or `fails`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    pub module: String,
    pub kind: String,
    pub change: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    pub module: String,
}

/// A watched kind, `apiVersion/Kind` (`v1/ConfigMap`, `apps/v1/Deployment`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    pub kind: String,
}

/// A module answer the host refused: the module and why (`other_namespace`,
/// `not_owned_kind`, `other_owner`, `too_many_objects`, `too_large`,
/// `too_deep`, `invalid_utf8`, `duplicate`, `status_not_object`, `not_json`,
/// ...: `runtime::Refusal`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    pub module: String,
    pub reason: &'static str,
}

/// `in_use` or `free`: see `allocator::HeapUse`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HeapLabels {
    pub state: &'static str,
}

/// `continued` (a reconcile woken as the next step) or `stopped`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    pub module: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: &'static str,
}
