// The playground's logic, free of the DOM so node tests can run it against
// the transpiled component: YAML in, the component's answers out.
import { LineCounter, isMap, isSeq, parseAllDocuments } from 'yaml';

/// Which `memcached` guard decides whether an optional kind exists, and the
/// rule it applies (guest/src/guards.rs), to explain a skipped object.
export const GUARDS = {
  PodDisruptionBudget: { fn: 'pdbEnabled', wit: 'pdb-enabled', rule: 'spec.highAvailability.podDisruptionBudget.enabled: true' },
  HorizontalPodAutoscaler: { fn: 'hpaEnabled', wit: 'hpa-enabled', rule: 'spec.autoscaling.enabled: true' },
  ServiceMonitor: {
    fn: 'serviceMonitorEnabled',
    wit: 'service-monitor-enabled',
    rule: 'spec.monitoring.enabled: true and a spec.monitoring.serviceMonitor section (even {})',
  },
  NetworkPolicy: { fn: 'networkPolicyEnabled', wit: 'network-policy-enabled', rule: 'spec.security.networkPolicy.enabled: true' },
};

/// YAML text to the CR as JSON text, or the syntax problems with 1-based
/// line and column. Only one CR: the playground shows one set of objects.
export function parseCr(text) {
  const lineCounter = new LineCounter();
  let docs;
  try {
    docs = parseAllDocuments(text, { lineCounter, prettyErrors: true });
  } catch (err) {
    return { problems: [{ kind: 'yaml', line: 1, col: 1, message: String(err.message ?? err) }] };
  }
  if (!Array.isArray(docs)) docs = [docs]; // an empty stream parses to one EmptyStream
  const problems = [];
  for (const doc of docs) {
    for (const err of doc.errors ?? []) {
      const pos = err.linePos?.[0] ?? { line: 1, col: 1 };
      // The position is shown apart from the message, so drop it from the text.
      const message = firstLine(err.message).replace(/ at line \d+, column \d+:?$/, '');
      problems.push({ kind: 'yaml', line: pos.line, col: pos.col, message });
    }
  }
  if (problems.length) return { problems };
  const present = docs.filter((doc) => doc.contents != null && !(doc.contents.value === null && !isMap(doc.contents)));
  if (present.length === 0) {
    return { problems: [{ kind: 'yaml', line: 1, col: 1, message: 'no Memcached CR: the editor is empty' }] };
  }
  if (present.length > 1) {
    const second = lineCounter.linePos(present[1].range[0]);
    return {
      problems: [{
        kind: 'yaml',
        line: second.line,
        col: second.col,
        message: `one CR at a time: this is document ${docs.indexOf(present[1]) + 1} (memcached-operator render takes several)`,
      }],
    };
  }
  const doc = present[0];
  let value;
  try {
    // Bounded alias expansion: a "billion laughs" text must not hang the page.
    value = doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    return { problems: [{ kind: 'yaml', line: 1, col: 1, message: firstLine(err.message) }] };
  }
  return { json: JSON.stringify(value), locate: (path) => locate(doc, lineCounter, path) };
}

/// The line and column of a field path such as
/// `spec.highAvailability.topologySpreadConstraints[0].maxSkew` in the
/// document, or of its deepest ancestor present (a required field that is
/// missing points at its parent). Keys may contain dots (label names), so
/// the longest key matching the next segments wins.
export function locate(doc, lineCounter, path) {
  const segments = splitPath(path);
  let node = doc.contents;
  let at = node?.range?.[0] ?? 0;
  let exact = true;
  let i = 0;
  while (i < segments.length && node) {
    const segment = segments[i];
    if (typeof segment === 'number') {
      if (!isSeq(node) || !node.items[segment]) { exact = false; break; }
      node = node.items[segment];
      at = node?.range?.[0] ?? at;
      i += 1;
      continue;
    }
    if (!isMap(node)) { exact = false; break; }
    let matched = false;
    for (let j = segments.length; j > i; j -= 1) {
      if (segments.slice(i, j).some((s) => typeof s === 'number')) continue;
      const key = segments.slice(i, j).join('.');
      const pair = node.items.find((p) => String(p.key?.value ?? p.key) === key);
      if (pair) {
        at = pair.key?.range?.[0] ?? at;
        node = pair.value;
        i = j;
        matched = true;
        break;
      }
    }
    if (!matched) { exact = false; break; }
  }
  if (i < segments.length) exact = false;
  const pos = lineCounter.linePos(at);
  return { line: pos.line, col: pos.col, exact };
}

export function splitPath(path) {
  const segments = [];
  for (const part of String(path).split('.')) {
    if (part === '') continue;
    const m = /^([^[]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) { segments.push(part); continue; }
    if (m[1]) segments.push(m[1]);
    for (const index of m[2].matchAll(/\[(\d+)\]/g)) segments.push(Number(index[1]));
  }
  return segments;
}

/// Renders a CR (JSON text) with one component instance's exports: the
/// typed `memcached` interface renders (exactly what `memcached-operator
/// render` prints), the `reconciler` contract's manifest names the owned
/// kinds. Answers { owned, objects, skipped, download } or { problems }
/// (field errors from the WIT `error` variant, each with its path). Each
/// object has a `key`: its kind, or kind/name when its kind appears more
/// than once (a Memcached CR owns at most one object of each kind).
export function renderCr(api, json) {
  const { memcached, reconciler } = api;
  let raw;
  try {
    raw = memcached.render(json);
  } catch (err) {
    return { problems: componentProblems(err) };
  }
  const objects = raw.map((text) => {
    const object = JSON.parse(text);
    return { kind: object.kind, name: object.metadata?.name, json: text, yaml: memcached.toYaml(text) };
  });
  for (const object of objects) {
    const alone = objects.filter((o) => o.kind === object.kind).length === 1;
    object.key = alone ? object.kind : `${object.kind}/${object.name}`;
  }
  const owned = reconciler.manifest().owned.map((k) => k.kind);
  const skipped = [];
  for (const kind of owned) {
    if (objects.some((o) => o.kind === kind)) continue;
    const guard = GUARDS[kind];
    const answer = guard ? memcached[guard.fn](json) : undefined;
    skipped.push({ kind, guard: guard?.wit, answer, rule: guard?.rule ?? 'always rendered' });
  }
  // Exactly what `memcached-operator render -f cr.yaml` prints: the
  // component's to-yaml over the array of every object, in reconcile order.
  const download = memcached.toYaml(`[${raw.join(',')}]`);
  return { owned, objects, skipped, download };
}

/// The tabs, in the manifest's (reconcile) order: per owned kind, one per
/// object rendered now and one per object of the baseline (a Map key ->
/// { kind, yaml }) that is not (an update would delete it); a kind with
/// neither gets one tab, keyed by the kind, to say why it is skipped.
/// Each tab is { key, kind, object } (object: undefined when not rendered).
export function tabsOf(owned, objects, baseline = new Map()) {
  const kinds = [...new Set([...owned, ...objects.map((o) => o.kind), ...[...baseline.values()].map((b) => b.kind)])];
  const tabs = [];
  for (const kind of kinds) {
    const keys = objects.filter((o) => o.kind === kind).map((o) => o.key);
    for (const [key, before] of baseline) if (before.kind === kind && !keys.includes(key)) keys.push(key);
    if (keys.length === 0) keys.push(kind);
    for (const key of keys) tabs.push({ key, kind, object: objects.find((o) => o.key === key) });
  }
  return tabs;
}

/// The WIT `error` variant (jco throws it as a ComponentError whose payload
/// is `{ tag, val }`) as a flat list of problems; anything else is a trap.
export function componentProblems(err) {
  const payload = err?.payload;
  if (payload && typeof payload.tag === 'string') {
    if (payload.tag === 'unsupported') return [{ kind: 'unsupported', path: '', message: String(payload.val) }];
    return payload.val.map((e) => ({
      kind: payload.tag,
      path: e.path,
      // serde's "at line 1 column 115" points into the JSON the page made,
      // not into the YAML the user sees; the path locates it instead.
      message: e.message.replace(/ at line \d+ column \d+$/, ''),
    }));
  }
  return [{ kind: 'trap', path: '', message: `the component trapped: ${err?.message ?? err}` }];
}

/// A line diff of two texts (LCS), as hunks with `context` unchanged lines
/// around each change. Each line is { op: ' ' | '+' | '-', text }.
export function diffLines(before, after, context = 3) {
  const a = splitLines(before);
  const b = splitLines(after);
  // Trim the common prefix and suffix first: edits are usually local, and
  // that keeps the quadratic table small.
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA -= 1; endB -= 1; }
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const n = midA.length;
  const m = midB.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lcs[i][j] = midA[i] === midB[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const lines = a.slice(0, start).map((text) => ({ op: ' ', text }));
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && midA[i] === midB[j]) { lines.push({ op: ' ', text: midA[i] }); i += 1; j += 1; }
    // Removals before additions, as diff(1) prints a changed line.
    else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) { lines.push({ op: '-', text: midA[i] }); i += 1; }
    else { lines.push({ op: '+', text: midB[j] }); j += 1; }
  }
  for (const text of a.slice(endA)) lines.push({ op: ' ', text });
  const added = lines.filter((l) => l.op === '+').length;
  const removed = lines.filter((l) => l.op === '-').length;
  const keep = lines.map((l, k) => lines.slice(Math.max(0, k - context), k + context + 1).some((x) => x.op !== ' '));
  const hunks = [];
  let hunk = null;
  lines.forEach((line, k) => {
    if (!keep[k]) { hunk = null; return; }
    if (!hunk) { hunk = []; hunks.push(hunk); }
    hunk.push(line);
  });
  return { added, removed, hunks };
}

function splitLines(text) {
  if (!text) return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

function firstLine(message) {
  return String(message).split('\n')[0];
}
