// The page: fetches through the API, draws the icicle, fills the panel and the gang table,
// follows the location hash (#hypernode=, #node=, #gang=) and refetches on every change the
// server announces on /api/events.

import { get, enc, gangPath, hyperNodeOf } from './api.js';
import { h, clear, fmt, plural } from './dom.js';
import { Icicle } from './icicle.js';
import { explainTables, gangPanel, hyperNodePanel, link, nodePanel } from './panels.js';

const $ = (sel) => document.querySelector(sel);
const ROOT = '<cluster>';
const GANG_ROWS = 500;

const state = { version: 0, summary: null, topo: null, gangs: [], token: 0 };

const go = {
  hyperNode: (name) => { location.hash = `hypernode=${enc(name)}`; },
  node: (name) => { location.hash = `node=${enc(name)}`; },
  gang: (key) => { location.hash = `gang=${enc(key)}`; },
};

const icicle = new Icicle($('#icicle'), {
  onDomain: (i) => go.hyperNode(state.topo.domains.name[i]),
  onNode: (name) => go.node(name),
});

function showError(err) {
  const box = $('#error');
  if (!err) { box.hidden = true; return; }
  box.textContent = err.message || String(err);
  box.hidden = false;
}

function selection() {
  const m = /^#(hypernode|node|gang)=(.+)$/.exec(location.hash);
  return m ? { kind: m[1], name: decodeURIComponent(m[2]) } : { kind: 'hypernode', name: ROOT };
}

// -- header, banners, unusable trees -------------------------------------------------------

function renderSummary(sm) {
  const c = sm.counts;
  const m = sm.metric;
  $('#source').textContent = `${sm.source.mode}: ${sm.source.description} · ${plural(c.nodes, 'node')} · ` +
    `${plural(c.hyperNodes, 'HyperNode')} · ${fmt(m.total - m.used - m.unavailable)} of ${fmt(m.total)} ${m.label} free`;
  $('#report-link').hidden = !sm.report;
  const live = $('#live');
  live.hidden = sm.source.mode !== 'live';
  if (sm.source.mode === 'live') {
    const err = sm.source.error;
    live.className = `badge${err ? ' bad' : sm.source.synced ? '' : ' warn'}`;
    live.textContent = err ? `API server: ${err}` : sm.source.synced ? 'live' : 'syncing…';
  }
  const probs = $('#problems');
  probs.hidden = !sm.problemCount;
  clear(probs);
  if (sm.problemCount) {
    probs.append(h('b', {}, `${plural(sm.problemCount, 'problem')} in the input (these objects are shown as read):`),
      h('ul', {}, sm.problems.slice(0, 5).map((p) => h('li', {}, p))),
      sm.problemCount > 5 ? h('span', {}, `… and ${sm.problemCount - 5} more (tierra validate lists them all)`) : null);
  }
}

function renderUnusable(topo) {
  const box = clear($('#unusable'));
  if (topo.mirrors) {  // the controller's Volcano copies, set aside: say which group is drawn
    box.append(h('div', { class: 'mirrors muted' }, topo.mirrors.note));
  }
  for (const t of topo.trees.filter((x) => !x.usable)) {
    box.append(h('div', { class: 'tree', dataset: { tree: t.name } },
      h('b', {}, `Tree ${t.name} is unusable`), ` (${plural(t.hyperNodes, 'HyperNode')}, drawn hatched; the scheduler does not use it):`,
      h('ul', {}, t.reasons.map((r) => h('li', {}, r)))));
  }
}

function renderCrumbs(path) {
  const nav = clear($('#crumbs'));
  path.forEach((p, i) => {
    if (i) nav.append(h('span', { class: 'sep' }, '›'));
    const label = p === ROOT ? 'cluster' : p;
    nav.append(i === path.length - 1 ? h('b', {}, label) : link(label, () => go.hyperNode(p)));
  });
}

// -- the selection ---------------------------------------------------------------------------

async function focusOn(name, token) {
  const i = icicle.indexOf.get(name) ?? icicle.root;
  icicle.zoom(i);
  const doc = await get(`/api/hypernodes/${enc(state.topo.domains.name[i])}`);
  if (token !== state.token) return null;
  icicle.setNodes(doc);
  renderCrumbs(doc.path);
  const m = doc.metric;
  $('#figures').textContent = `${fmt(m.free)} of ${fmt(m.total)} ${m.label} free here`;
  return doc;
}

function contextOf(name) {
  // A leaf is shown with its siblings: zoom to its parent when it has one.
  const i = icicle.indexOf.get(name);
  if (i === undefined || i === icicle.root) return ROOT;
  const d = state.topo.domains;
  const leaf = icicle.children[i].length === 0;
  return leaf && d.parent[i] >= 0 ? d.name[d.parent[i]] : name;
}

async function showSelection() {
  const token = ++state.token;
  const sel = selection();
  const panel = $('#panel');
  try {
    if (sel.kind === 'hypernode') {
      icicle.setHighlight([], {});
      icicle.select(icicle.indexOf.get(sel.name) ?? -1);
      const doc = await focusOn(sel.name, token);
      if (doc) clear(panel).append(...hyperNodePanel(doc, go));
    } else if (sel.kind === 'node') {
      const doc = await get(`/api/nodes/${enc(sel.name)}`);
      if (token !== state.token) return;
      icicle.setHighlight([], { [doc.name]: 1 });
      icicle.select(-1);
      await focusOn(doc.leaves.length ? doc.leaves[0] : ROOT, token);
      if (token === state.token) clear(panel).append(...nodePanel(doc, go));
    } else {
      const doc = await get(gangPath(sel.name));
      if (token !== state.token) return;
      icicle.setHighlight(Object.keys(doc.domains), Object.fromEntries(doc.nodes.map((n) => [n, 1])));
      icicle.select(-1);
      const where = doc.achieved ? contextOf(hyperNodeOf(doc.achieved)) : ROOT;
      await focusOn(where, token);
      if (token !== state.token) return;
      clear(panel).append(...gangPanel(doc, go));
      markGangRow(doc.key);
      if (doc.status === 'pending' || doc.status === 'partial') {
        const exp = await get(`${gangPath(doc.key)}/explain?show=8`);
        const box = $('#explain');
        if (token === state.token && box) box.append(...explainTables(exp, go));
      }
    }
    showError(null);
  } catch (err) {
    if (token !== state.token) return;
    showError(err);
    clear(panel).append(h('p', { class: 'muted' }, err.message));
  }
}

// -- gangs -----------------------------------------------------------------------------------

async function loadGangs() {
  const doc = await get('/api/gangs');
  state.gangs = doc.gangs;
  state.gangsStale = doc.analysedVersion !== doc.version;
  renderGangs();
}

function renderGangs() {
  const text = $('#gang-filter').value.trim().toLowerCase();
  const status = $('#gang-status').value;
  const rows = state.gangs.filter((g) => (!status || g.status === status) && (!text || g.key.toLowerCase().includes(text)));
  const pending = state.gangs.filter((g) => g.status === 'pending' || g.status === 'partial').length;
  $('#gang-count').textContent = `${plural(state.gangs.length, 'gang')}, ${fmt(pending)} waiting` +
    (rows.length > GANG_ROWS ? ` · first ${GANG_ROWS} of ${fmt(rows.length)} shown` : '') +
    (state.gangsStale ? ' · reasons from a scheduling dry run a moment ago (the cluster is changing)' : '');
  const table = clear($('#gang-table'));
  table.append(h('thead', {}, h('tr', {}, ['gang', 'status', 'pods bound', 'constraint', 'achieved', 'why it waits / where it would go']
    .map((c) => h('th', {}, c)))));
  const sel = selection();
  table.append(h('tbody', {}, rows.slice(0, GANG_ROWS).map((g) => h('tr', {
    dataset: { gang: g.key, status: g.status }, class: sel.kind === 'gang' && sel.name === g.key ? 'sel' : null,
    onclick: () => go.gang(g.key),
  },
  h('td', {}, g.key),
  h('td', { class: `status ${g.status}` }, g.status),
  h('td', { class: 'num' }, `${fmt(g.pods.bound)}/${fmt(g.pods.total)}`),
  h('td', {}, g.constraint),
  h('td', {}, g.achieved ? `${hyperNodeOf(g.achieved) === ROOT ? 'whole cluster' : hyperNodeOf(g.achieved)} (tier ${g.achieved.tier})` : '–'),
  h('td', { class: g.reason ? 'reason' : 'muted' }, g.reason || (g.wouldPlace ? `would be bound within ${g.wouldPlace}` : ''))))));
}

function markGangRow(key) {
  for (const tr of document.querySelectorAll('#gang-table tbody tr')) tr.classList.toggle('sel', tr.dataset.gang === key);
}

// -- search ----------------------------------------------------------------------------------

let searchTimer = 0;
let searchResults = [];

function searchFor(q) {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(async () => {
    const box = $('#search-results');
    if (!q.trim()) { box.hidden = true; icicle.setHits([]); return; }
    const doc = await get(`/api/search?q=${enc(q)}`);
    if ($('#search').value !== q) return;
    searchResults = [];
    clear(box);
    const group = (title, items, make) => {
      if (!items.length) return;
      box.append(h('div', { class: 'group' }, title));
      for (const it of items) {
        const [label, action] = make(it);
        searchResults.push(action);
        box.append(link(label, () => { action(); box.hidden = true; }, { class: 'result' }));
      }
    };
    group('HyperNodes', doc.hyperNodes, (n) => [n, () => go.hyperNode(n)]);
    group('nodes', doc.nodes, (n) => [`${n.name}${n.leaves.length ? ` (in ${n.leaves.join(', ')})` : ''}`, () => go.node(n.name)]);
    group('gangs', doc.gangs, (g) => [g, () => go.gang(g)]);
    if (!searchResults.length) box.append(h('div', { class: 'group' }, `nothing named like “${q}”`));
    box.hidden = false;
    icicle.setHits([...doc.hyperNodes, ...doc.nodes.flatMap((n) => n.leaves)]);
  }, 120);
}

$('#search').addEventListener('input', (ev) => searchFor(ev.target.value));
$('#search').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && searchResults.length) { searchResults[0](); $('#search-results').hidden = true; }
  if (ev.key === 'Escape') { $('#search-results').hidden = true; }
});
$('#gang-filter').addEventListener('input', renderGangs);
$('#gang-status').addEventListener('change', renderGangs);
$('#size-by').addEventListener('change', (ev) => icicle.setSizeBy(ev.target.value));
window.addEventListener('hashchange', showSelection);

// -- loading and live updates ----------------------------------------------------------------

async function refresh() {
  const [summary, topo] = await Promise.all([get('/api/summary'), get('/api/topology')]);
  state.summary = summary;
  state.topo = topo;
  $('#size-by').options[0].textContent = topo.metric.label;
  renderSummary(summary);
  renderUnusable(topo);
  icicle.setTopology(topo);
  markOnce('tierra-painted');  // the picture is drawn: the benchmark's first paint
  state.version = Math.min(summary.version, topo.version);
  await showSelection();
  await loadGangs();
  markOnce('tierra-gangs');
  document.body.dataset.version = String(state.version);
}

const marked = new Set();

function markOnce(name) {
  // After the next frame, so the mark is when the browser has painted what was drawn.
  if (marked.has(name)) return;
  marked.add(name);
  requestAnimationFrame(() => setTimeout(() => performance.mark(name), 0));
}

async function start() {
  try {
    await refresh();
  } catch (err) {
    showError(err);
  }
  requestAnimationFrame(() => { document.body.dataset.ready = '1'; });
  const events = new EventSource('/api/events');
  let busy = false;
  let again = false;
  events.addEventListener('version', async (ev) => {
    const { version } = JSON.parse(ev.data);
    if (version === state.version) return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      do { again = false; await refresh(); } while (again);
      showError(null);
    } catch (err) {
      showError(err);
    } finally {
      busy = false;
    }
  });
  events.onerror = () => {
    if (events.readyState !== EventSource.OPEN) showError(new Error('lost the connection to tierra serve; retrying…'));
  };
  events.onopen = () => showError(null);
}

start();
