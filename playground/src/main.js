// The playground page: an editor for a Memcached CR and, on every edit, the
// objects the operator's component renders for it, computed in the page.
import { instantiate } from '../.gen/component/memcached.js';
import samples from '../.gen/samples.js';
import { GUARDS, diffLines, parseCr, renderCr, tabsOf } from './logic.js';

const $ = (id) => document.getElementById(id);
const editor = $('cr');
const gutter = $('gutter');
const problemsList = $('problems');
const tabs = $('tabs');
const panels = $('panels');
const status = $('status');

const state = {
  core: null, // the compiled core module, instantiated again after a trap
  api: null,
  owned: [],
  result: null, // the last render without problems
  baseline: new Map(), // tab key -> { kind, yaml }, what "Changes" compares against
  active: null, // the shown tab's key: its kind, or kind/name for a kind shown more than once
  view: 'yaml',
  renders: 0,
};

async function start() {
  for (const sample of samples) {
    const option = document.createElement('option');
    option.value = sample.name;
    option.textContent = sample.name;
    option.title = sample.title;
    $('sample').append(option);
  }
  editor.value = samples[0]?.text ?? '';
  drawGutter(new Set());
  try {
    state.core = await WebAssembly.compileStreaming(fetch(new URL('memcached.core.wasm', document.baseURI)));
    state.api = await instantiate(() => state.core, {});
    state.owned = state.api.reconciler.manifest().owned.map((k) => k.kind);
  } catch (err) {
    document.body.dataset.state = 'error';
    status.textContent = `Could not load the component: ${err.message ?? err}`;
    status.className = 'bad';
    return;
  }
  state.active = state.owned[0];
  update({ rebase: true });
  document.body.dataset.state = 'ready';

  let timer = null;
  // Render once typing pauses; data-pending tells tests a render is due.
  editor.addEventListener('input', () => {
    drawGutter(new Set());
    clearTimeout(timer);
    document.body.dataset.pending = 'true';
    timer = setTimeout(() => update(), 120);
  });
  editor.addEventListener('scroll', () => { gutter.scrollTop = editor.scrollTop; });
  editor.addEventListener('keydown', (event) => {
    if (event.key === 'Tab' && !event.shiftKey && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      editor.setRangeText('  ', editor.selectionStart, editor.selectionEnd, 'end');
      editor.dispatchEvent(new Event('input'));
    }
  });
  $('sample').addEventListener('change', (event) => {
    const sample = samples.find((s) => s.name === event.target.value);
    if (!sample) return;
    editor.value = sample.text;
    editor.scrollTop = 0;
    clearTimeout(timer);
    update({ rebase: true });
  });
  $('baseline').addEventListener('click', () => {
    rebase();
    draw();
  });
  $('download').addEventListener('click', download);
}

/// Parses and renders the editor's text; problems keep the last good
/// objects on screen (marked stale), so the page never goes blank.
function update({ rebase: reset = false } = {}) {
  const started = performance.now();
  const parsed = parseCr(editor.value);
  let problems = parsed.problems ?? [];
  if (!parsed.problems) {
    const result = renderCr(state.api, parsed.json);
    if (result.problems) {
      problems = result.problems.map((p) => ({ ...p, ...(p.path !== undefined ? parsed.locate(p.path) : {}) }));
      if (result.problems.some((p) => p.kind === 'trap')) reinstantiate();
    } else {
      state.result = result;
      state.owned = result.owned;
    }
  }
  const millis = performance.now() - started;
  state.problems = problems;
  if (reset) rebase();
  drawProblems(problems);
  draw();
  state.renders += 1;
  document.body.dataset.pending = 'false';
  document.body.dataset.renders = String(state.renders);
  document.body.dataset.problems = String(problems.length);
  if (problems.length) {
    status.textContent = `${problems.length} problem${problems.length > 1 ? 's' : ''}: showing the last valid render`;
    status.className = 'bad';
  } else {
    status.textContent = `${plural(state.result.objects.length, 'object')} rendered in ${millis.toFixed(1)} ms`;
    status.className = 'good';
  }
  $('download').disabled = problems.length > 0 || !state.result;
}

async function reinstantiate() {
  try {
    state.api = await instantiate(() => state.core, {});
  } catch (err) {
    status.textContent = `Could not restart the component: ${err.message ?? err}`;
  }
}

function rebase() {
  state.baseline = new Map((state.result?.objects ?? []).map((o) => [o.key, { kind: o.kind, yaml: o.yaml }]));
}

function drawProblems(problems) {
  problemsList.replaceChildren();
  const lines = new Set();
  for (const p of problems) {
    const li = document.createElement('li');
    li.className = `problem ${p.kind}`;
    li.dataset.kind = p.kind;
    if (p.path !== undefined) li.dataset.path = p.path;
    if (p.line) {
      li.dataset.line = String(p.line);
      li.dataset.col = String(p.col);
      lines.add(p.line);
      const jump = document.createElement('button');
      jump.type = 'button';
      jump.className = 'goto';
      jump.textContent = p.kind === 'yaml' ? `line ${p.line}, column ${p.col}` : `line ${p.line}`;
      jump.addEventListener('click', () => selectLine(p.line));
      li.append(jump, ' ');
    }
    if (p.path) {
      const code = document.createElement('code');
      code.textContent = p.path;
      li.append(code, ': ');
    }
    const label = { yaml: 'YAML syntax', malformed: 'wrong shape', invalid: 'invalid', unsupported: 'unsupported', trap: 'error' }[p.kind];
    li.append(p.message);
    li.title = label ?? p.kind;
    problemsList.append(li);
  }
  drawGutter(lines);
}

function drawGutter(errorLines) {
  const count = editor.value.split('\n').length;
  const parts = [];
  for (let n = 1; n <= count; n += 1) parts.push(errorLines.has(n) ? `<span class="err">${n}</span>` : String(n));
  gutter.innerHTML = `${parts.join('\n')}\n`;
  gutter.scrollTop = editor.scrollTop;
}

function selectLine(line) {
  const lines = editor.value.split('\n');
  const start = lines.slice(0, line - 1).reduce((sum, l) => sum + l.length + 1, 0);
  editor.focus();
  editor.setSelectionRange(start, start + (lines[line - 1]?.length ?? 0));
  const lineHeight = parseFloat(getComputedStyle(editor).lineHeight) || 18;
  editor.scrollTop = Math.max(0, (line - 4) * lineHeight);
}

/// One tab per owned object (a kind with none: one tab saying why), in the
/// manifest's (reconcile) order.
function draw() {
  const result = state.result;
  const stale = state.problems?.length > 0;
  const tabsShown = tabsOf(state.owned, result?.objects ?? [], state.baseline);
  // A tab that is gone (its kind now shown per name, or back to one):
  // show one of the same kind.
  const activeKind = state.active?.split('/')[0];
  state.active = (tabsShown.find((t) => t.key === state.active) ?? tabsShown.find((t) => t.kind === activeKind) ?? tabsShown[0])?.key;
  tabs.replaceChildren();
  panels.replaceChildren();
  for (const { key, kind, object } of tabsShown) {
    const change = changeOf(state.baseline.get(key)?.yaml, object?.yaml);
    const tab = document.createElement('button');
    tab.type = 'button';
    tab.setAttribute('role', 'tab');
    tab.className = `tab ${object ? 'rendered' : 'skipped'}`;
    tab.dataset.kind = kind;
    tab.dataset.key = key;
    tab.setAttribute('aria-selected', String(key === state.active));
    tab.textContent = key;
    if (change.badge) {
      const badge = document.createElement('span');
      badge.className = `badge ${change.badge}`;
      badge.textContent = change.badge;
      tab.append(' ', badge);
    }
    tab.addEventListener('click', () => { state.active = key; draw(); });
    tabs.append(tab);

    const panel = document.createElement('section');
    panel.className = 'panel';
    panel.dataset.kind = kind;
    panel.dataset.key = key;
    panel.dataset.status = object ? 'rendered' : 'skipped';
    panel.dataset.change = change.badge || 'none';
    panel.hidden = key !== state.active;
    if (stale) {
      panel.dataset.stale = 'true';
      const note = document.createElement('p');
      note.className = 'stale';
      note.textContent = 'The CR has problems (left); this is the last valid render.';
      panel.append(note);
    }
    panel.append(panelHeader(kind, object));
    if (state.view === 'diff') panel.append(diffView(key, object, change));
    else if (object) panel.append(pre('yaml', object.yaml));
    else panel.append(skippedView(kind));
    panels.append(panel);
  }
}

function panelHeader(kind, object) {
  const header = document.createElement('div');
  header.className = 'panel-header';
  const title = document.createElement('span');
  title.className = 'title';
  title.textContent = object ? `${kind} ${object.name}` : `${kind}: not rendered`;
  header.append(title);
  for (const [view, label] of [['yaml', 'YAML'], ['diff', 'Changes']]) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = `view ${view}`;
    button.textContent = label;
    button.setAttribute('aria-pressed', String(state.view === view));
    button.addEventListener('click', () => { state.view = view; draw(); });
    header.append(button);
  }
  if (object) {
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'copy';
    copy.textContent = 'Copy';
    copy.addEventListener('click', () => copyText(object.yaml, copy));
    header.append(copy);
  }
  return header;
}

function skippedView(kind) {
  const skipped = state.result?.skipped.find((s) => s.kind === kind);
  const p = document.createElement('p');
  p.className = 'skipped-reason';
  if (skipped?.guard) {
    p.append('Skipped: the guard ');
    const code = document.createElement('code');
    code.textContent = `${skipped.guard}`;
    p.append(code, ` answered ${skipped.answer}. It is rendered with ${skipped.rule}; when an existing one is controlled by this CR, the operator deletes it.`);
  } else {
    p.textContent = `Not rendered${GUARDS[kind] ? '' : ' (this kind has no guard)'}.`;
  }
  return p;
}

function changeOf(before, after) {
  if (before === undefined && after === undefined) return { badge: '' };
  if (before === undefined) return { badge: 'new' };
  if (after === undefined) return { badge: 'deleted' };
  if (before === after) return { badge: '' };
  return { badge: 'changed', diff: diffLines(before, after) };
}

function diffView(key, object, change) {
  const box = document.createElement('div');
  box.className = 'diff';
  const summary = document.createElement('p');
  summary.className = 'diff-summary';
  box.append(summary);
  const before = state.baseline.get(key)?.yaml;
  if (!change.badge) {
    summary.textContent = object
      ? 'No change against the baseline: an update would write nothing.'
      : 'Not rendered, in the baseline or now.';
    return box;
  }
  if (change.badge === 'new') {
    summary.textContent = 'Not in the baseline: an update would create it.';
    box.append(diffPre(diffLines('', object.yaml)));
  } else if (change.badge === 'deleted') {
    summary.textContent = 'Rendered in the baseline, skipped now: an update would delete it.';
    box.append(diffPre(diffLines(before, '')));
  } else {
    const { added, removed } = change.diff;
    summary.textContent = `Against the baseline, ${plural(added, 'line')} added and ${removed} removed: what an update would change.`;
    box.append(diffPre(change.diff));
  }
  return box;
}

function diffPre({ hunks }) {
  const block = document.createElement('pre');
  block.className = 'diff-lines';
  hunks.forEach((hunk, index) => {
    if (index > 0) block.append(line('gap', '…'));
    for (const l of hunk) block.append(line({ '+': 'add', '-': 'del', ' ': 'ctx' }[l.op], `${l.op} ${l.text}`));
  });
  return block;
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function line(cls, text) {
  const span = document.createElement('span');
  span.className = cls;
  span.textContent = `${text}\n`;
  return span;
}

function pre(cls, text) {
  const block = document.createElement('pre');
  block.className = cls;
  block.textContent = text;
  return block;
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API (an insecure origin): the old way, through a selection.
    const area = document.createElement('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  button.textContent = 'Copied';
  setTimeout(() => { button.textContent = 'Copy'; }, 1200);
}

function download() {
  if (!state.result || state.problems?.length) return;
  const name = state.result.objects[0]?.name ?? 'memcached';
  const url = URL.createObjectURL(new Blob([state.result.download], { type: 'application/yaml' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = `${name}-objects.yaml`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

start();
