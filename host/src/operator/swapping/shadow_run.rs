//! Running a shadow (`shadow.rs`): started for a window, compared after
//! every reconcile of the serving version on the same inputs, ended when
//! its window closes or its spec goes.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, PoisonError, Weak};
use std::time::SystemTime;

use kube::Resource;

use crate::operator::context::Context;
use crate::operator::swapping::probation::roll_out;
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::shadow::{DIFFERENCES_LISTED, EndedShadow, Shadow, ShadowDifference};
use crate::operator::swapping::swap_plan::plan_parent;
use crate::operator::watching::cached_object::CachedObject;
use crate::planning::kinds::Kinds;
use crate::runtime::logic_module::LogicModule;

/// After a reconcile of `parent` on `serving`: the shadow's answer for it
/// against `serving`'s, counted. Writes nothing.
pub fn compare(ctx: &Context, serving: &Serving, shadow: &Shadow, parent: &CachedObject) {
    if shadow.serving.module.digest() == serving.module.digest() || parent.meta().deletion_timestamp.is_some() {
        return;
    }
    let Ok(serving_kinds) = Kinds::from_manifest(serving.module.manifest()) else { return };
    let now = crate::planning::step::now();
    let planned = plan_parent(ctx, parent, (serving, &serving_kinds), (&shadow.serving, &shadow.kinds), &now);
    let parent_kind = ctx.parent_kind.name().to_owned();
    let mut differences: Vec<(String, &'static str)> =
        planned.objects.iter().map(|object| (object.kind.clone(), object.action.as_str())).collect();
    if !planned.status.is_empty() {
        differences.push((parent_kind.clone(), "status"));
    }
    if planned.fails() {
        differences.push((parent_kind.clone(), "fails"));
    }
    ctx.metrics.shadowed(&differences);
    let mut tally = shadow.report.lock().unwrap_or_else(PoisonError::into_inner);
    tally.report.reconciles += 1;
    if differences.is_empty() {
        return;
    }
    let key = (planned.namespace.clone(), planned.name.clone());
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    if !tally.differing.insert(hasher.finish()) {
        return;
    }
    tally.report.differing_parents += 1;
    if tally.report.differences.len() >= DIFFERENCES_LISTED {
        return;
    }
    let parent_name = format!("{}/{}", planned.namespace, planned.name);
    let first = match planned.objects.first() {
        Some(object) => ShadowDifference {
            parent: parent_name,
            change: object.action.as_str().to_owned(),
            kind: object.kind.clone(),
            name: object.name.clone(),
            field: object.fields.first().map(|f| f.path.clone()).unwrap_or_default(),
        },
        None if planned.fails() => ShadowDifference {
            parent: parent_name,
            change: "fails".into(),
            kind: parent_kind,
            name: planned.name.clone(),
            field: planned.new_error.as_ref().map(|e| e.message.clone()).unwrap_or_default(),
        },
        None => ShadowDifference {
            parent: parent_name,
            change: "status".into(),
            kind: parent_kind,
            name: planned.name.clone(),
            field: planned.status.first().map(|f| f.path.clone()).unwrap_or_default(),
        },
    };
    tally.report.differences.push(first);
}

/// Runs `module` (pulled from `reference`) beside the serving version until
/// `until`: its kinds' caches listed first, then every parent reconciled
/// once (writing nothing new) so each is compared at least once.
pub async fn start(
    ctx: &Arc<Context>,
    module: Arc<LogicModule>,
    reference: String,
    until: SystemTime,
) -> Result<(), String> {
    // It reads what it would read serving: its identity must be allowed that.
    ctx.identity.check(&module).await.map_err(|error| error.to_string())?;
    let serving = Arc::new(ctx.serving_for(module).map_err(|error| error.to_string())?);
    serving.wait_until_known(ctx.swap_policy.cache_sync_timeout).await?;
    serving.read_schemas().await;
    let digest = serving.module.digest().to_owned();
    let shadow = Arc::new(Shadow::new(serving, reference, until)?);
    tracing::info!(
        module = ctx.module_name,
        reference = shadow.reference,
        digest,
        left_s = until.duration_since(SystemTime::now()).unwrap_or_default().as_secs(),
        "shadowing a module version beside the serving one: it writes nothing"
    );
    ctx.swap.shadow.store(Some(shadow));
    ctx.swap.changed();
    roll_out(ctx.clone(), None);
    let weak = Arc::downgrade(ctx);
    let left = until.duration_since(SystemTime::now()).unwrap_or_default();
    tokio::spawn(async move {
        tokio::time::sleep(left).await;
        end(&weak, &digest);
    });
    Ok(())
}

/// The shadow of `digest` is over: it stops running, its report is kept.
fn end(ctx: &Weak<Context>, digest: &str) {
    let Some(ctx) = ctx.upgrade() else { return };
    let current = ctx.swap.shadow.load_full();
    let Some(shadow) = current.filter(|s| s.serving.module.digest() == digest) else { return };
    let report = shadow.report();
    tracing::info!(
        module = ctx.module_name,
        reference = shadow.reference,
        reconciles = report.reconciles,
        differing_parents = report.differing_parents,
        "the shadow's window ended"
    );
    ctx.swap.shadow.store(None);
    *ctx.swap.shadow_ended.lock().unwrap_or_else(PoisonError::into_inner) =
        Some(EndedShadow { reference: shadow.reference.clone(), digest: digest.to_owned(), report });
    ctx.swap.changed();
}

/// Stops a shadow before its window ends (its spec was removed or changed).
pub fn stop(ctx: &Context) {
    if ctx.swap.shadow.swap(None).is_some() {
        ctx.swap.changed();
    }
}
