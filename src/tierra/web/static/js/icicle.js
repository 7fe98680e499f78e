// The topology as an icicle: one row per tier (the whole cluster on top), one <g class="domain">
// per HyperNode, widths by GPUs (or nodes), each cell split into used | free | unavailable.
// Zooming maps the focused domain to the full width; its nodes are drawn in a row below the
// lowest tier when the server lists them (small enough domains).

import { s, clear, fmt } from './dom.js';

const ROW = 30;       // px per tier row
const NODE_ROW = 38;  // px of the node row
const MARK = 5;       // px of the gang marks above nodes
const LABEL_MIN = 46; // px a cell needs before it gets a label
const GUTTER = 92;    // px at the left for the tier names
const CHAR = 6.2;     // px per character of an 11px label (an estimate; labels never overflow)

export class Icicle {
  constructor(svg, { onDomain, onNode }) {
    this.svg = svg;
    this.onDomain = onDomain;
    this.onNode = onNode;
    this.sizeBy = 'metric';
    this.topo = null;
    this.focus = -1;
    this.selected = -1;
    this.highlight = { domains: new Set(), nodes: new Map() };
    this.hits = new Set();
    this.nodeDoc = null;
    this.pending = 0;
    svg.addEventListener('click', (ev) => this.click(ev));
    new ResizeObserver(() => this.invalidate()).observe(svg.parentElement);
  }

  // -- data ---------------------------------------------------------------------------------

  setTopology(topo) {
    const focusName = this.focus >= 0 && this.topo ? this.topo.domains.name[this.focus] : null;
    const selName = this.selected >= 0 && this.topo ? this.topo.domains.name[this.selected] : null;
    this.topo = topo;
    const d = topo.domains;
    this.n = d.name.length;
    this.root = topo.root;
    this.indexOf = new Map(d.name.map((name, i) => [name, i]));
    this.children = Array.from({ length: this.n }, () => []);
    for (let i = 0; i < this.n; i++) if (d.parent[i] >= 0) this.children[d.parent[i]].push(i);
    const tiers = [...new Set(d.tier)].sort((a, b) => b - a);
    this.rowOfTier = new Map(tiers.map((t, r) => [t, r]));
    this.rows = tiers.length;
    this.tierLabels = tiers.map((t) => {
      if (t === topo.rootTier) return 'cluster';
      const named = topo.tiers.find((x) => x.tier === t);
      return named && named.names.length ? `${t} · ${named.names.join(', ')}` : `tier ${t}`;
    });
    this.focus = this.indexOf.get(focusName) ?? this.root;
    this.selected = this.indexOf.get(selName) ?? -1;
    this.layout();
    this.build();
  }

  setSizeBy(mode) {
    this.sizeBy = mode;
    this.layout();
    this.invalidate();
  }

  // One render in the next frame however many changes come before it.
  invalidate() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = 0; this.render(); });
  }

  weight(i) {
    const d = this.topo.domains;
    return this.sizeBy === 'nodes' ? d.nodes[i] : d.total[i];
  }

  // Spans bottom-up (a domain is at least as wide as its children), then x top-down.
  layout() {
    const d = this.topo.domains;
    const order = [...Array(this.n).keys()].sort((a, b) => d.tier[a] - d.tier[b]);
    this.span = new Float64Array(this.n);
    for (const i of order) {
      let sum = 0;
      for (const c of this.children[i]) sum += this.span[c];
      if (i === this.root) {
        const out = this.topo.outside;
        this.outsideSpan = this.sizeBy === 'nodes' ? out.nodes : out.total;
        this.span[i] = sum + this.outsideSpan;
      } else {
        this.span[i] = Math.max(this.weight(i), sum);
      }
    }
    // Domains with nothing to size them by (no GPUs, or an unusable tree's inner
    // HyperNodes holding no nodes) still get a sliver, so every domain can be seen.
    const sliver = (this.span[this.root] || 1) * 0.004;
    let added = 0;
    for (const i of order) {
      if (i === this.root) continue;
      if (this.span[i] === 0) { this.span[i] = sliver; added += sliver; }
      let sum = 0;
      for (const c of this.children[i]) sum += this.span[c];
      this.span[i] = Math.max(this.span[i], sum);
    }
    if (added) {
      let sum = this.outsideSpan;
      for (const c of this.children[this.root]) sum += this.span[c];
      this.span[this.root] = sum;
    }
    this.x0 = new Float64Array(this.n);
    for (let k = order.length - 1; k >= 0; k--) {
      const p = order[k];
      let x = this.x0[p];
      for (const c of this.children[p]) { this.x0[c] = x; x += this.span[c]; }
      if (p === this.root) this.outsideX0 = x;
    }
  }

  // -- elements -----------------------------------------------------------------------------

  build() {
    const svg = clear(this.svg);
    const defs = s('defs');
    const hatch = s('pattern', { id: 'hatch-bad', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
    hatch.append(s('rect', { width: 6, height: 6, fill: '#fff' }), s('rect', { width: 1.6, height: 6, fill: 'var(--bad)' }));
    defs.append(hatch);
    svg.append(defs);
    this.gTiers = s('g', { class: 'tiers' });
    this.gDomains = s('g', { class: 'domains' });
    this.gOutside = s('g', { class: 'outside' });
    this.gNodes = s('g', { class: 'nodes' });
    this.gLabels = s('g', { class: 'labels' });
    svg.append(this.gTiers, this.gDomains, this.gOutside, this.gNodes, this.gLabels);
    const d = this.topo.domains;
    this.cells = new Array(this.n);
    for (let i = 0; i < this.n; i++) {
      const g = s('g', { class: 'domain', 'data-name': d.name[i], 'data-i': i });
      const bg = s('rect', { class: 'bg' });
      const used = s('rect', { class: 'used' });
      const unav = s('rect', { class: 'unav' });
      const title = s('title');
      title.textContent = this.describe(i);
      g.append(bg, used, unav, title);
      this.cells[i] = { g, bg, used, unav };
      this.gDomains.append(g);
    }
    this.render();
  }

  describe(i) {
    const d = this.topo.domains;
    const label = this.topo.metric.label;
    const free = d.total[i] - d.used[i] - d.unavailable[i];
    let text = `${d.name[i]} · tier ${d.tier[i]}${d.tierName[i] ? ` (${d.tierName[i]})` : ''}\n` +
      `${fmt(free)} of ${fmt(d.total[i])} ${label} free, ${fmt(d.used[i])} used, ` +
      `${fmt(d.unavailable[i])} unavailable · ${fmt(d.nodes[i])} nodes`;
    if (d.degraded[i]) text += `\ndegraded: ${d.degraded[i]}`;
    if (!d.usable[i]) text += '\nunusable tree: the scheduler does not use it';
    return text;
  }

  setNodes(doc) {
    this.nodeDoc = doc;
    this.renderNodes();
  }

  setHighlight(domains, nodes) {
    this.highlight = { domains: new Set(domains), nodes: new Map(Object.entries(nodes || {})) };
    this.invalidate();
  }

  setHits(names) {
    this.hits = new Set(names);
    this.invalidate();
  }

  zoom(i) {
    if (i !== this.focus) this.nodeDoc = null;
    this.focus = i;
    this.invalidate();
  }

  select(i) {
    this.selected = i;
    this.invalidate();
  }

  // -- drawing ------------------------------------------------------------------------------

  // Read once per render: reading clientWidth between attribute writes forces a layout
  // each time (thousands of them at 10,000 nodes).
  measure() {
    this.fullWidth = Math.max(this.svg.parentElement.clientWidth, 300);
    this.width = this.fullWidth - GUTTER;
  }

  // Screen x (from the gutter's right edge) and width of a span in layout units.
  screen(x0, span) {
    const f = this.focus;
    const scale = this.width / (this.span[f] || 1);
    return [GUTTER + (x0 - this.x0[f]) * scale, span * scale];
  }

  render() {
    if (!this.topo) return;
    if (this.pending) { cancelAnimationFrame(this.pending); this.pending = 0; }
    this.measure();
    const W = GUTTER + this.width;
    const d = this.topo.domains;
    const height = this.rows * ROW + MARK + NODE_ROW + 14;
    this.svg.setAttribute('viewBox', `0 0 ${this.fullWidth} ${height}`);
    this.svg.setAttribute('height', height);
    clear(this.gLabels);
    clear(this.gTiers);
    const tierLabel = (text, y) => {
      const t = s('text', { class: 'tier-label', x: 6, y });
      t.textContent = text;
      this.gTiers.append(t);
    };
    for (let r = 0; r < this.rows; r++) tierLabel(this.tierLabels[r], r * ROW + ROW / 2 + 4);
    tierLabel('nodes', this.rows * ROW + MARK + 4 + NODE_ROW / 2 + 4);
    for (let i = 0; i < this.n; i++) {
      const cell = this.cells[i];
      const total = d.total[i];
      cell.g.setAttribute('class', this.classes(i, total));
      const [x, w] = this.screen(this.x0[i], this.span[i]);
      if (x + w < GUTTER || x > W || w <= 0) { cell.g.setAttribute('display', 'none'); continue; }
      cell.g.removeAttribute('display');
      const left = Math.max(x, GUTTER);
      const right = Math.min(x + w, W);
      const cw = right - left;
      const y = this.rowOfTier.get(d.tier[i]) * ROW + 1;
      const gap = cw > 4 ? 1 : 0;
      setRect(cell.bg, left, y, cw - gap, ROW - 2);
      const fu = total > 0 ? d.used[i] / total : 0;
      const fa = total > 0 ? d.unavailable[i] / total : 0;
      setRect(cell.used, left, y, (cw - gap) * fu, ROW - 2);
      setRect(cell.unav, left + (cw - gap) * (1 - fa), y, (cw - gap) * fa, ROW - 2);
      if (cw >= LABEL_MIN) this.label(i, left, y, cw - gap, fu);
    }
    this.renderOutside();
    this.renderNodes();
  }

  classes(i, total) {
    const d = this.topo.domains;
    let c = 'domain';
    if (total <= 0 && this.sizeBy === 'metric') c += ' empty';
    if (!d.usable[i]) c += ' unusable';
    if (d.degraded[i]) c += ' degraded';
    if (this.highlight.domains.has(d.name[i])) c += ' hl';
    if (this.hits.has(d.name[i])) c += ' hit';
    if (i === this.selected) c += ' sel';
    if (i === this.focus) c += ' focus';
    return c;
  }

  label(i, x, y, w, usedShare) {
    const d = this.topo.domains;
    const free = d.total[i] - d.used[i] - d.unavailable[i];
    const name = i === this.root ? 'whole cluster' : d.name[i];
    const full = `${name}${d.degraded[i] ? ' ⚠' : ''} · ${fmt(free)}/${fmt(d.total[i])} free`;
    const chars = Math.floor((w - 8) / CHAR);
    let text = full.length <= chars ? full : name.length <= chars ? name : null;
    if (text === null) {
      if (chars < 4) return;
      text = `${name.slice(0, chars - 1)}…`;
    }
    const t = s('text', { x: x + 4, y: y + ROW / 2 + 3 });
    // White on the used (dark) part only when the whole label fits on it.
    if (w * usedShare >= text.length * CHAR + 8) t.setAttribute('class', 'on-used');
    t.textContent = text;
    this.gLabels.append(t);
  }

  renderOutside() {
    clear(this.gOutside);
    const out = this.topo.outside;
    if (!out.nodes || this.focus !== this.root) return;
    const [x, w] = this.screen(this.outsideX0, this.outsideSpan);
    if (w < 1) return;
    const y = ROW + 1;
    const g = s('g');
    g.append(s('rect', { x, y, width: Math.max(w - 1, 1), height: ROW - 2 }));
    if (w > LABEL_MIN) {
      const t = s('text', { x: x + 4, y: y + ROW / 2 + 3, class: 'note' });
      t.textContent = `${fmt(out.nodes)} nodes in no HyperNode`;
      g.append(t);
    }
    this.gOutside.append(g);
  }

  renderNodes() {
    if (!this.topo) return;
    this.measure();
    clear(this.gNodes);
    const doc = this.nodeDoc;
    const y = this.rows * ROW + MARK + 4;
    if (!doc || doc.name !== this.topo.domains.name[this.focus]) return;
    if (!doc.nodesListed) {
      const t = s('text', { x: GUTTER + 6, y: y + NODE_ROW / 2 + 4, class: 'note' });
      t.textContent = `${fmt(doc.health.nodes)} nodes here: zoom into a domain of at most ` +
        `${fmt(doc.nodeLimit)} nodes to see each one`;
      this.gNodes.append(t);
      return;
    }
    const place = (idx, x, w) => {
      const total = idx.reduce((a, k) => a + Math.max(doc.nodes[k].total, 0), 0);
      let cx = x;
      for (const k of idx) {
        const share = total > 0 ? doc.nodes[k].total / total : 1 / idx.length;
        this.node(doc.nodes[k], cx, y, w * share);
        cx += w * share;
      }
    };
    for (const [leaf, idx] of doc.members) {
      const i = this.indexOf.get(leaf);
      if (i === undefined) continue;
      const [x, w] = this.screen(this.x0[i], this.span[i]);
      place(idx, x, w);
    }
    if (doc.outside.length) {
      const [x, w] = this.screen(this.outsideX0, this.outsideSpan);
      place(doc.outside, x, w);
    }
  }

  node(n, x, y, w) {
    if (x + w < GUTTER || x > GUTTER + this.width) return;
    const gap = w > 4 ? 1 : 0;
    const g = s('g', { class: `node ${n.state}${this.highlight.nodes.has(n.name) ? ' hl' : ''}`, 'data-node': n.name });
    const h = NODE_ROW - 2;
    const fu = n.total > 0 ? n.used / n.total : 0;
    const fa = n.state === 'Ready' || n.total <= 0 ? 0 : Math.max(n.total - n.used, 0) / n.total;
    g.append(
      s('rect', { class: 'bg', x, y, width: Math.max(w - gap, 0.5), height: h }),
      s('rect', { class: 'used', x, y: y + h * (1 - fu), width: Math.max(w - gap, 0), height: h * fu }),
      s('rect', { class: 'unav', x, y, width: Math.max(w - gap, 0), height: h * fa }),
    );
    const title = s('title');
    title.textContent = `${n.name} · ${n.state} · ${fmt(n.used)}/${fmt(n.total)} ${this.topo.metric.label} used · ${n.pods} pods`;
    g.append(title);
    const pods = this.highlight.nodes.get(n.name);
    if (pods) g.append(s('rect', { class: 'mark', x, y: y - MARK - 1, width: Math.max(w - gap, 1), height: MARK }));
    if (w >= LABEL_MIN) {
      const t = s('text', { x: x + 3, y: y + 13 });
      t.textContent = n.name.length * CHAR <= w - 6 ? n.name : `${n.name.slice(0, Math.max(Math.floor((w - 6) / CHAR) - 1, 1))}…`;
      g.append(t);
    }
    this.gNodes.append(g);
  }

  click(ev) {
    const node = ev.target.closest('g.node');
    if (node) { this.onNode(node.dataset.node); return; }
    const dom = ev.target.closest('g.domain');
    if (dom) this.onDomain(Number(dom.dataset.i));
  }
}

function setRect(el, x, y, w, h) {
  el.setAttribute('x', x.toFixed(2));
  el.setAttribute('y', y);
  el.setAttribute('width', Math.max(w, 0).toFixed(2));
  el.setAttribute('height', h);
}
