//! A module's answer as it crosses the component boundary, bounded before
//! the host copies it: `desired`'s `list<string>` and `status`'s `string`
//! are lifted by the types here, which read the list's length and each
//! string's length in the module's memory first and refuse an answer over
//! the limits before a byte of it is copied into the host. An answer that
//! is not valid UTF-8 is refused with the index of its first bad string.
//! The module's memory is at most 256 MiB per call; these limits keep what
//! the host takes from it far below that.

use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

/// Most objects one `desired` answer may hold.
pub const MAX_OBJECTS: usize = 10_000;
/// Most bytes one answer may hold (every object text of `desired` together,
/// or the `status` text).
pub const MAX_ANSWER_BYTES: usize = 16 << 20;
/// Deepest nesting of arrays and objects in one JSON text. Kubernetes
/// objects nest a few levels; serde_json stops at 128, this stops first.
pub const MAX_DEPTH: usize = 100;
/// Most labels, or annotations, one answer may set on its parent.
pub const MAX_PARENT_KEYS: usize = 256;
/// Most bytes of keys and values of the labels, or the annotations, an
/// answer sets on its parent: the API server's own bound on a parent's
/// annotations (256 KiB).
pub const MAX_PARENT_BYTES: usize = 256 << 10;
/// The shortest timer an answer may ask for: a shorter one waits this long,
/// so a module asking for 0 cannot keep a worker busy.
pub const MIN_TIMER: std::time::Duration = std::time::Duration::from_secs(1);

/// Why the host refused an answer: the `reason` label of
/// `wasm_operator_module_refused_answers_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    OtherNamespace,
    NotOwnedKind,
    OtherOwner,
    NoName,
    NotObject,
    TooManyObjects,
    TooLarge,
    TooDeep,
    InvalidUtf8,
    Duplicate,
    StatusNotObject,
    NotJson,
    TooManyParentKeys,
    ParentKeyNotDeclared,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::OtherNamespace => "other_namespace",
            Refusal::NotOwnedKind => "not_owned_kind",
            Refusal::OtherOwner => "other_owner",
            Refusal::NoName => "no_name",
            Refusal::NotObject => "not_object",
            Refusal::TooManyObjects => "too_many_objects",
            Refusal::TooLarge => "too_large",
            Refusal::TooDeep => "too_deep",
            Refusal::InvalidUtf8 => "invalid_utf8",
            Refusal::Duplicate => "duplicate",
            Refusal::StatusNotObject => "status_not_object",
            Refusal::NotJson => "not_json",
            Refusal::TooManyParentKeys => "too_many_parent_keys",
            Refusal::ParentKeyNotDeclared => "parent_key_not_declared",
        }
    }
}

/// An answer the host refuses, and where in it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{problem}")]
pub struct RefusedAnswer {
    pub reason: Refusal,
    pub problem: String,
}

impl RefusedAnswer {
    pub fn new(reason: Refusal, problem: impl Into<String>) -> Self {
        Self { reason, problem: problem.into() }
    }
}

/// The count and total size of an answer of `count` texts of `lengths`
/// bytes, refused when over the limits (the lengths are summed only up to
/// the first that passes the limit).
pub fn check_bounds(count: usize, lengths: impl IntoIterator<Item = usize>) -> Result<(), RefusedAnswer> {
    if count > MAX_OBJECTS {
        let problem = format!("{count} objects in one answer, more than the {MAX_OBJECTS} allowed");
        return Err(RefusedAnswer::new(Refusal::TooManyObjects, problem));
    }
    let mut total = 0usize;
    for (index, length) in lengths.into_iter().enumerate() {
        total = total.saturating_add(length);
        if total > MAX_ANSWER_BYTES {
            let problem = format!(
                "object {index}: the answer passes {} MiB here, more than an answer may hold",
                MAX_ANSWER_BYTES >> 20
            );
            return Err(RefusedAnswer::new(Refusal::TooLarge, problem));
        }
    }
    Ok(())
}

/// Whether `text` nests arrays and objects deeper than [`MAX_DEPTH`]
/// (brackets inside strings do not count). One pass, no recursion.
pub fn too_deep(text: &str) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for byte in text.bytes() {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') | (false, _, b'"') => in_string = !in_string,
            (false, _, b'[' | b'{') => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Parses one JSON text of an answer: refused as [`Refusal::TooDeep`]
/// before parsing when it nests too deep, as [`Refusal::NotJson`] when it
/// does not parse. `at` says where, for the message.
pub fn parse(at: &str, text: &str) -> Result<serde_json::Value, RefusedAnswer> {
    if too_deep(text) {
        let problem = format!("{at}: JSON nested deeper than {MAX_DEPTH} levels");
        return Err(RefusedAnswer::new(Refusal::TooDeep, problem));
    }
    serde_json::from_str(text).map_err(|e| RefusedAnswer::new(Refusal::NotJson, format!("{at}: not JSON: {e}")))
}

/// `status`'s answer: a JSON object (the parent's status), or refused.
pub fn check_status(text: &str) -> Result<serde_json::Value, RefusedAnswer> {
    let status = parse("status", text)?;
    if !status.is_object() {
        let problem = format!("status: {} is not a JSON object", preview(text));
        return Err(RefusedAnswer::new(Refusal::StatusNotObject, problem));
    }
    Ok(status)
}

/// The start of a text, for a message.
fn preview(text: &str) -> String {
    let start: String = text.chars().take(40).collect();
    if start.len() < text.len() { format!("{start}...") } else { start }
}

fn pair(bytes: &[u8]) -> Option<(usize, usize)> {
    let word = |at: usize| bytes.get(at..at + 4)?.try_into().ok().map(u32::from_le_bytes);
    Some((usize::try_from(word(0)?).ok()?, usize::try_from(word(4)?).ok()?))
}

fn flat_pair(src: &[wasmtime::ValRaw; 2]) -> Option<(usize, usize)> {
    Some((usize::try_from(src[0].get_u32()).ok()?, usize::try_from(src[1].get_u32()).ok()?))
}

fn out_of_bounds() -> wasmtime::Error {
    wasmtime::Error::msg("list pointer/length out of bounds of memory")
}

/// `desired`'s `list<string>`, lifted only within the limits.
pub struct BoundedTexts(pub Vec<String>);

// SAFETY: the same type and ABI as `Vec<String>`, which does the lifting.
unsafe impl ComponentType for BoundedTexts {
    type Lower = <Vec<String> as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <Vec<String> as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <Vec<String> as ComponentType>::typecheck(ty, types)
    }
}

impl BoundedTexts {
    /// The list at `ptr` of `len` strings in the module's memory, checked
    /// against the limits from the lengths alone.
    fn check(cx: &mut LiftContext<'_>, ptr: usize, len: usize) -> wasmtime::Result<()> {
        let memory = cx.memory();
        let lengths =
            (0..len).map(|i| memory.get(ptr + 8 * i..).and_then(pair).map_or(usize::MAX, |(_, length)| length));
        if len.checked_mul(8).and_then(|size| ptr.checked_add(size)).is_none_or(|end| end > memory.len()) {
            return Err(out_of_bounds());
        }
        check_bounds(len, lengths).map_err(wasmtime::Error::new)
    }

    /// What the list lifted to, or the index of its first string that is
    /// not UTF-8 when that is why it failed.
    fn lifted(
        cx: &mut LiftContext<'_>,
        ptr: usize,
        len: usize,
        lifted: wasmtime::Result<Vec<String>>,
    ) -> wasmtime::Result<Self> {
        match lifted {
            Ok(texts) => Ok(Self(texts)),
            Err(error) if error.downcast_ref::<std::str::Utf8Error>().is_some() => {
                let memory = cx.memory();
                let bad = (0..len).find(|i| {
                    memory
                        .get(ptr + 8 * i..)
                        .and_then(pair)
                        .and_then(|(at, length)| memory.get(at..at.checked_add(length)?))
                        .is_none_or(|bytes| std::str::from_utf8(bytes).is_err())
                });
                let at = bad.map_or_else(|| "an object".to_owned(), |i| format!("object {i}"));
                let problem = format!(
                    "{at}: not valid UTF-8 ({})",
                    error.downcast_ref::<std::str::Utf8Error>().map_or_else(String::new, ToString::to_string)
                );
                Err(wasmtime::Error::new(RefusedAnswer::new(Refusal::InvalidUtf8, problem)))
            }
            Err(error) => Err(error),
        }
    }
}

// SAFETY: checks, then delegates to `Vec<String>`'s lifting.
unsafe impl Lift for BoundedTexts {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        let (ptr, len) = flat_pair(src).ok_or_else(out_of_bounds)?;
        Self::check(cx, ptr, len)?;
        let lifted = <Vec<String> as Lift>::linear_lift_from_flat(cx, ty, src);
        Self::lifted(cx, ptr, len, lifted)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        let (ptr, len) = pair(bytes).ok_or_else(out_of_bounds)?;
        Self::check(cx, ptr, len)?;
        let lifted = <Vec<String> as Lift>::linear_lift_from_memory(cx, ty, bytes);
        Self::lifted(cx, ptr, len, lifted)
    }
}

/// `reach`'s `answer` (1.3), as the host uses it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredState {
    /// The objects, as `desired` answers them.
    pub objects: Vec<String>,
    /// Reconcile the parent again after this long, at least [`MIN_TIMER`].
    pub again_after: Option<std::time::Duration>,
    pub parent_labels: Vec<(String, String)>,
    pub parent_annotations: Vec<(String, String)>,
}

impl DesiredState {
    /// `desired`'s answer: the objects alone.
    pub fn objects(objects: Vec<String>) -> Self {
        Self { objects, ..Self::default() }
    }
}

impl From<LiftedDesiredState> for DesiredState {
    fn from(lifted: LiftedDesiredState) -> Self {
        Self {
            objects: lifted.objects.0,
            again_after: timer(lifted.again_after_ms),
            parent_labels: lifted.parent_labels.0,
            parent_annotations: lifted.parent_annotations.0,
        }
    }
}

/// `reach`'s `finalize` (1.3), as the host uses it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finalizing {
    /// The owned objects to keep (or write) while the parent is deleted.
    pub objects: Vec<String>,
    /// Done: what remains is deleted and the finalizer removed.
    pub done: bool,
    pub again_after: Option<std::time::Duration>,
}

impl From<LiftedFinalizing> for Finalizing {
    fn from(lifted: LiftedFinalizing) -> Self {
        Self { objects: lifted.objects.0, done: lifted.done, again_after: timer(lifted.again_after_ms) }
    }
}

/// `finalizing` as it crosses the boundary, its list bounded.
#[derive(wasmtime::component::ComponentType, wasmtime::component::Lift)]
#[component(record)]
pub struct LiftedFinalizing {
    objects: BoundedTexts,
    done: bool,
    #[component(name = "again-after-ms")]
    again_after_ms: Option<u32>,
}

/// An answer's `again-after-ms`, at least [`MIN_TIMER`].
fn timer(again_after_ms: Option<u32>) -> Option<std::time::Duration> {
    again_after_ms.map(|ms| std::time::Duration::from_millis(u64::from(ms)).max(MIN_TIMER))
}

/// `desired-state` as it crosses the boundary, each list bounded before it
/// is copied.
#[derive(wasmtime::component::ComponentType, wasmtime::component::Lift)]
#[component(record)]
pub struct LiftedDesiredState {
    objects: BoundedTexts,
    #[component(name = "again-after-ms")]
    again_after_ms: Option<u32>,
    #[component(name = "parent-labels")]
    parent_labels: BoundedPairs,
    #[component(name = "parent-annotations")]
    parent_annotations: BoundedPairs,
}

/// A `list<tuple<string, string>>` of keys and values for the parent's
/// metadata, lifted only within [`MAX_PARENT_KEYS`] and
/// [`MAX_PARENT_BYTES`].
pub struct BoundedPairs(pub Vec<(String, String)>);

// SAFETY: the same type and ABI as `Vec<(String, String)>`, which does the
// lifting.
unsafe impl ComponentType for BoundedPairs {
    type Lower = <Vec<(String, String)> as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <Vec<(String, String)> as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <Vec<(String, String)> as ComponentType>::typecheck(ty, types)
    }
}

impl BoundedPairs {
    /// The list at `ptr` of `len` pairs (16 bytes each: two strings'
    /// pointer and length) checked from the lengths alone.
    fn check(cx: &mut LiftContext<'_>, ptr: usize, len: usize) -> wasmtime::Result<()> {
        let memory = cx.memory();
        if len.checked_mul(16).and_then(|size| ptr.checked_add(size)).is_none_or(|end| end > memory.len()) {
            return Err(out_of_bounds());
        }
        if len > MAX_PARENT_KEYS {
            let problem = format!("{len} keys for the parent's metadata, more than the {MAX_PARENT_KEYS} allowed");
            return Err(wasmtime::Error::new(RefusedAnswer::new(Refusal::TooManyParentKeys, problem)));
        }
        let mut total = 0usize;
        for i in 0..len {
            let at = ptr + 16 * i;
            let key = memory.get(at..).and_then(pair).map_or(usize::MAX, |(_, length)| length);
            let value = memory.get(at + 8..).and_then(pair).map_or(usize::MAX, |(_, length)| length);
            total = total.saturating_add(key).saturating_add(value);
            if total > MAX_PARENT_BYTES {
                let problem = format!(
                    "the parent's labels or annotations pass {} KiB at key {i}, more than an answer may set",
                    MAX_PARENT_BYTES >> 10
                );
                return Err(wasmtime::Error::new(RefusedAnswer::new(Refusal::TooLarge, problem)));
            }
        }
        Ok(())
    }
}

// SAFETY: checks, then delegates to `Vec<(String, String)>`'s lifting.
unsafe impl Lift for BoundedPairs {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        let (ptr, len) = flat_pair(src).ok_or_else(out_of_bounds)?;
        Self::check(cx, ptr, len)?;
        <Vec<(String, String)> as Lift>::linear_lift_from_flat(cx, ty, src).map(Self)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        let (ptr, len) = pair(bytes).ok_or_else(out_of_bounds)?;
        Self::check(cx, ptr, len)?;
        <Vec<(String, String)> as Lift>::linear_lift_from_memory(cx, ty, bytes).map(Self)
    }
}

/// `status`'s `string`, lifted only within the limit.
pub struct BoundedText(pub String);

// SAFETY: the same type and ABI as `String`, which does the lifting.
unsafe impl ComponentType for BoundedText {
    type Lower = <String as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <String as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <String as ComponentType>::typecheck(ty, types)
    }
}

impl BoundedText {
    fn check(len: usize) -> wasmtime::Result<()> {
        if len > MAX_ANSWER_BYTES {
            let problem =
                format!("status: {len} bytes, more than the {} MiB an answer may hold", MAX_ANSWER_BYTES >> 20);
            return Err(wasmtime::Error::new(RefusedAnswer::new(Refusal::TooLarge, problem)));
        }
        Ok(())
    }

    fn lifted(lifted: wasmtime::Result<String>) -> wasmtime::Result<Self> {
        lifted.map(Self).map_err(|error| match error.downcast_ref::<std::str::Utf8Error>() {
            Some(utf8) => wasmtime::Error::new(RefusedAnswer::new(
                Refusal::InvalidUtf8,
                format!("status: not valid UTF-8 ({utf8})"),
            )),
            None => error,
        })
    }
}

// SAFETY: checks, then delegates to `String`'s lifting.
unsafe impl Lift for BoundedText {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        let (_, len) = flat_pair(src).ok_or_else(out_of_bounds)?;
        Self::check(len)?;
        Self::lifted(<String as Lift>::linear_lift_from_flat(cx, ty, src))
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        let (_, len) = pair(bytes).ok_or_else(out_of_bounds)?;
        Self::check(len)?;
        Self::lifted(<String as Lift>::linear_lift_from_memory(cx, ty, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_objects_or_bytes_are_refused_from_their_lengths() {
        assert_eq!(check_bounds(3, [10, 20, 30]), Ok(()));
        assert_eq!(check_bounds(MAX_OBJECTS + 1, []).map_err(|r| r.reason), Err(Refusal::TooManyObjects));
        let large = check_bounds(3, [10, MAX_ANSWER_BYTES, usize::MAX]).expect_err("too large");
        assert_eq!((large.reason, large.problem.starts_with("object 1:")), (Refusal::TooLarge, true));
        assert_eq!(check_bounds(1, [usize::MAX]).map_err(|r| r.reason), Err(Refusal::TooLarge));
    }

    #[test]
    fn nesting_is_measured_outside_strings_without_recursion() {
        assert!(!too_deep(r#"{"a": [1, {"b": "[[[[{{{{"}]}"#));
        assert!(!too_deep(&format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH))));
        assert!(too_deep(&"[".repeat(MAX_DEPTH + 1)));
        assert!(too_deep(&"{\"a\":".repeat(100_000)));
        // An escaped quote does not end the string.
        assert!(!too_deep(&format!("\"\\\"{}\"", "[".repeat(200))));
        assert_eq!(parse("status", &"[".repeat(100_000)).map_err(|r| r.reason), Err(Refusal::TooDeep));
        assert_eq!(parse("status", "{").map_err(|r| r.reason), Err(Refusal::NotJson));
    }
}
