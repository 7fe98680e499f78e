// The topology as an icicle: one row per tier (the whole cluster on top), one <g class="domain">
// per HyperNode, widths by GPUs (or nodes), each cell split into used | free | unavailable.
// A leaf draws its used share at its left and its unavailable share at its right; a parent's
// used and unavailable are the union of its children's (plus its own nodes' after them), so
// every used bar sits over the children that use it. Zooming maps the focused domain to the
// full width; its nodes are drawn in a row below the lowest tier when the server lists them
// (small enough domains). Text is measured (a canvas, no layout) and never cut: a tier label
// widens the gutter or wraps, a name too long for its cell is left to the cell's tooltip,
// and node names too wide for their node turn upright.

import { s, clear, fmt } from './dom.js';

const ROW = 30;        // px per tier row
const NODE_ROW = 38;   // px of the node row (more when node names stand upright)
const NODE_ROW_MAX = 140;
const MARK = 5;        // px of the gang marks above nodes
const LABEL_MIN = 46;  // px a cell needs before it gets a label
const GUTTER_MIN = 60; // px at the left for the tier names, at least
const LABEL_PX = 11;   // font sizes (app.css: #icicle and .tier-label)
const TIER_PX = 10;
const UPRIGHT_MIN = 12; // px a node needs for an upright name

const ctx = document.createElement('canvas').getContext('2d');

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
    this.segments(order);
  }

  // Used and unavailable stretches of every domain, in layout units, bottom-up: a leaf's
  // used share at its left, unavailable at its right; a parent's the union of its children's
  // and, in the room after them, its own nodes' (the root's: the nodes in no HyperNode).
  segments(order) {
    const d = this.topo.domains;
    this.usedSeg = new Array(this.n);
    this.unavSeg = new Array(this.n);
    for (const i of order) {
      const kids = this.children[i];
      const x0 = this.x0[i];
      let used = [];
      let unav = [];
      let inner = 0, kidsTotal = 0, kidsUsed = 0, kidsUnav = 0;
      for (const c of kids) {
        used = used.concat(this.usedSeg[c]);
        unav = unav.concat(this.unavSeg[c]);
        inner += this.span[c];
        kidsTotal += d.total[c];
        kidsUsed += d.used[c];
        kidsUnav += d.unavailable[c];
      }
      const restX = x0 + inner;
      const restW = this.span[i] - inner;
      const restTotal = d.total[i] - kidsTotal;
      if (restW > 0 && restTotal > 0) {
        const fu = clamp01((d.used[i] - kidsUsed) / restTotal);
        const fa = clamp01((d.unavailable[i] - kidsUnav) / restTotal);
        if (fu > 0) used.push([restX, restX + restW * fu]);
        if (fa > 0) unav.push([restX + restW * (1 - fa), restX + restW]);
      }
      this.usedSeg[i] = merged(used);
      this.unavSeg[i] = merged(unav);
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
      const used = s('path', { class: 'used' });
      const unav = s('path', { class: 'unav' });
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
    this.font = getComputedStyle(this.svg).fontFamily || 'sans-serif';
    this.fitTierLabels();
    this.width = this.fullWidth - this.gutter;
  }

  textWidth(text, px) {
    ctx.font = `${px}px ${this.font}`;
    return ctx.measureText(text).width;
  }

  // The gutter as wide as the widest tier label (at most 30% of the picture); a label wider
  // than that wraps after its commas onto a second line, and the gutter grows until every
  // label fits in two.
  fitTierLabels() {
    const widths = this.tierLabels.map((t) => this.textWidth(t, TIER_PX));
    const cap = this.fullWidth * 0.3;
    let inner = Math.min(Math.max(...widths, 0), cap);
    for (;;) {
      this.tierLines = this.tierLabels.map((t) => this.wrap(t, inner));
      if (this.tierLines.every((lines) => lines.length <= 2) || inner >= this.fullWidth * 0.45) break;
      inner += 8;
    }
    this.gutter = Math.max(GUTTER_MIN, Math.ceil(inner) + 12);
  }

  wrap(text, width) {
    const words = text.split(/(?<=,) /);
    const lines = [];
    let line = '';
    for (const w of words) {
      const next = line ? `${line} ${w}` : w;
      if (line && this.textWidth(next, TIER_PX) > width) { lines.push(line); line = w; } else line = next;
    }
    if (line) lines.push(line);
    return lines;
  }

  // Screen x (from the gutter's right edge) and width of a span in layout units.
  screen(x0, span) {
    const f = this.focus;
    const scale = this.width / (this.span[f] || 1);
    return [this.gutter + (x0 - this.x0[f]) * scale, span * scale];
  }

  // A path of rectangles for stretches (layout units) seen in [left, right] on screen.
  bars(segs, left, right, y, h) {
    let d = '';
    const out = [];
    for (const [a, b] of segs) {
      const [x, w] = this.screen(a, b - a);
      const x1 = Math.max(x, left);
      const x2 = Math.min(x + w, right);
      if (x2 - x1 < 0.05) continue;
      const last = out[out.length - 1];
      if (last && x1 - last[1] < 0.3) last[1] = x2; else out.push([x1, x2]);
    }
    for (const [x1, x2] of out) d += `M${x1.toFixed(2)} ${y}h${(x2 - x1).toFixed(2)}v${h}h${(x1 - x2).toFixed(2)}z`;
    return [d, out];
  }

  height() {
    return this.rows * ROW + MARK + this.nodeRow + 14;
  }

  render() {
    if (!this.topo) return;
    if (this.pending) { cancelAnimationFrame(this.pending); this.pending = 0; }
    this.measure();
    this.nodeRow = this.nodeRow || NODE_ROW;
    const W = this.gutter + this.width;
    const d = this.topo.domains;
    this.setHeight();
    clear(this.gLabels);
    this.renderTierLabels();
    for (let i = 0; i < this.n; i++) {
      const cell = this.cells[i];
      const total = d.total[i];
      cell.g.setAttribute('class', this.classes(i, total));
      const [x, w] = this.screen(this.x0[i], this.span[i]);
      if (x + w < this.gutter || x > W || w <= 0) { cell.g.setAttribute('display', 'none'); continue; }
      cell.g.removeAttribute('display');
      const left = Math.max(x, this.gutter);
      const right = Math.min(x + w, W);
      const cw = right - left;
      const y = this.rowOfTier.get(d.tier[i]) * ROW + 1;
      const gap = cw > 4 ? 1 : 0;
      setRect(cell.bg, left, y, cw - gap, ROW - 2);
      const [used, usedOnScreen] = this.bars(this.usedSeg[i], left, right - gap, y, ROW - 2);
      cell.used.setAttribute('d', used);
      cell.unav.setAttribute('d', this.bars(this.unavSeg[i], left, right - gap, y, ROW - 2)[0]);
      if (cw >= LABEL_MIN) this.label(i, left, y, cw - gap, usedOnScreen);
    }
    this.renderOutside();
    this.renderNodes();
  }

  setHeight() {
    const height = this.height();
    this.svg.setAttribute('viewBox', `0 0 ${this.fullWidth} ${height}`);
    this.svg.setAttribute('height', height);
  }

  renderTierLabels() {
    clear(this.gTiers);
    const tierLabel = (lines, mid) => {
      const t = s('text', { class: 'tier-label', x: 6, y: mid + 4 - (lines.length - 1) * 6 });
      lines.forEach((line, k) => {
        const span = s('tspan', { x: 6, dy: k ? 12 : 0 });
        span.textContent = line;
        t.append(span);
      });
      this.gTiers.append(t);
    };
    for (let r = 0; r < this.rows; r++) tierLabel(this.tierLines[r], r * ROW + ROW / 2);
    tierLabel(['nodes'], this.rows * ROW + MARK + 4 + this.nodeRow / 2);
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

  // The name and its figures, else the name alone, else nothing (the tooltip has it): a
  // label is never cut. White on the used colour when it lies wholly on one used stretch.
  label(i, x, y, w, usedOnScreen) {
    const d = this.topo.domains;
    const free = d.total[i] - d.used[i] - d.unavailable[i];
    const name = i === this.root ? 'whole cluster' : d.name[i];
    const full = `${name}${d.degraded[i] ? ' ⚠' : ''} · ${fmt(free)}/${fmt(d.total[i])} free`;
    let text = full;
    let tw = this.textWidth(full, LABEL_PX);
    if (tw > w - 8) {
      text = name;
      tw = this.textWidth(name, LABEL_PX);
      if (tw > w - 8) return;
    }
    const t = s('text', { x: x + 4, y: y + ROW / 2 + 3 });
    const onUsed = usedOnScreen.some(([a, b]) => a <= x + 2 && b >= x + 4 + tw + 2);
    if (onUsed) t.setAttribute('class', 'on-used');
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
    if (!doc || doc.name !== this.topo.domains.name[this.focus]) {
      this.setNodeRow(NODE_ROW);
      return;
    }
    if (!doc.nodesListed) {
      this.setNodeRow(NODE_ROW);
      const t = s('text', { x: this.gutter + 6, y: y + NODE_ROW / 2 + 4, class: 'note' });
      t.textContent = `${fmt(doc.health.nodes)} nodes here: zoom into a domain of at most ` +
        `${fmt(doc.nodeLimit)} nodes to see each one`;
      this.gNodes.append(t);
      return;
    }
    const placed = [];
    const place = (idx, x, w) => {
      const total = idx.reduce((a, k) => a + Math.max(doc.nodes[k].total, 0), 0);
      let cx = x;
      for (const k of idx) {
        const share = total > 0 ? doc.nodes[k].total / total : 1 / idx.length;
        placed.push([doc.nodes[k], cx, w * share]);
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
    // Names that do not fit across their node stand upright, the row as tall as they need.
    const W = this.gutter + this.width;
    let row = NODE_ROW;
    for (const p of placed) {
      const [n, x, w] = p;
      p.push(this.textWidth(n.name, LABEL_PX));
      if (x + w < this.gutter || x > W) continue;
      if (p[3] > w - 6 && w >= UPRIGHT_MIN) row = Math.max(row, Math.ceil(p[3]) + 10);
    }
    this.setNodeRow(Math.min(row, NODE_ROW_MAX));
    for (const [n, x, w, tw] of placed) this.node(n, x, y, w, tw);
  }

  setNodeRow(row) {
    if (row === this.nodeRow) return;
    this.nodeRow = row;
    this.setHeight();
    this.renderTierLabels();
  }

  node(n, x, y, w, tw) {
    if (x + w < this.gutter || x > this.gutter + this.width) return;
    const gap = w > 4 ? 1 : 0;
    const g = s('g', { class: `node ${n.state}${this.highlight.nodes.has(n.name) ? ' hl' : ''}`, 'data-node': n.name });
    const h = this.nodeRow - 2;
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
    // Whole names only: across the node when it is wide enough, else upright, else none.
    // White on the used colour when the name lies on it (used fills a node from the bottom).
    const usedTop = y + h * (1 - fu);
    if (tw <= w - 6) {
      const t = s('text', { x: x + 3, y: y + 13 });
      if (usedTop <= y + 2) t.setAttribute('class', 'on-used');
      t.textContent = n.name;
      g.append(t);
    } else if (w >= UPRIGHT_MIN && tw <= h - 6) {
      const cx = x + (w - gap) / 2 + 4;
      const cy = y + h - 4;
      const cls = usedTop <= cy - tw - 2 ? 'upright on-used' : 'upright';
      const t = s('text', { x: cx, y: cy, transform: `rotate(-90 ${cx.toFixed(2)} ${cy})`, class: cls });
      t.textContent = n.name;
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

function clamp01(v) {
  return Math.min(Math.max(v, 0), 1);
}

// Stretches [a, b] sorted, touching ones joined (a full child beside a full child is one).
function merged(segs) {
  if (segs.length < 2) return segs;
  const sorted = segs.slice().sort((p, q) => p[0] - q[0]);
  const out = [sorted[0].slice()];
  for (let k = 1; k < sorted.length; k++) {
    const last = out[out.length - 1];
    const [a, b] = sorted[k];
    if (a <= last[1] + 1e-9) last[1] = Math.max(last[1], b); else out.push([a, b]);
  }
  return out;
}

function setRect(el, x, y, w, h) {
  el.setAttribute('x', x.toFixed(2));
  el.setAttribute('y', y);
  el.setAttribute('width', Math.max(w, 0).toFixed(2));
  el.setAttribute('height', h);
}
