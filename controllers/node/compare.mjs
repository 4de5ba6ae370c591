// Comparing objects the way the API server reads them, and the merge patch
// between two statuses (as the Rust host's host/src/operator/compare.rs).

/// Equal, counting a null member as absent (the API server drops nulls).
export function sameIgnoringNulls(a, b) {
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)].filter((k) => a[k] != null || b[k] != null));
    return [...keys].every((k) => sameIgnoringNulls(a[k], b[k]));
  }
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameIgnoringNulls(x, b[i]));
  return a === b;
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`.
export function mergePatch(from, to) {
  if (!isObject(from) || !isObject(to)) return to;
  const patch = {};
  for (const [key, old] of Object.entries(from)) if (old != null && to[key] == null) patch[key] = null;
  for (const [key, value] of Object.entries(to)) {
    if (value == null || (key in from && sameIgnoringNulls(from[key], value))) continue;
    patch[key] = isObject(from[key]) ? mergePatch(from[key], value) : value;
  }
  return patch;
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
