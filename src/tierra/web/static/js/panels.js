// The side panel: a HyperNode's figures, a node, or a gang (with tierra explain's tables).

import { hyperNodeOf } from './api.js';
import { h, fmt, plural } from './dom.js';

export function link(text, onclick, attrs = {}) {
  return h('a', { ...attrs, onclick: (ev) => { ev.preventDefault(); onclick(); }, href: '#' }, text);
}

function stack(total, used, unavailable) {
  const pct = (x) => `${total > 0 ? (100 * x) / total : 0}%`;
  const free = Math.max(total - used - unavailable, 0);
  return h('div', { class: 'stack', title: `${fmt(used)} used, ${fmt(free)} free, ${fmt(unavailable)} unavailable` },
    h('i', { class: 'used', style: `width:${pct(used)}` }),
    h('i', { class: 'free', style: `width:${pct(free)}` }),
    h('i', { class: 'unavailable', style: `width:${pct(unavailable)}` }));
}

function resources(rows) {
  return h('table', { class: 'resources' },
    h('thead', {}, h('tr', {}, h('th', {}, 'resource'), h('th', { class: 'num' }, 'free'),
      h('th', { class: 'num' }, 'used'), h('th', { class: 'num' }, 'allocatable'))),
    h('tbody', {}, rows.map((r) => h('tr', {}, h('td', {}, r.name), h('td', { class: 'num' }, r.free),
      h('td', { class: 'num' }, r.used), h('td', { class: 'num' }, r.allocatable)))));
}

function dl(pairs) {
  return h('dl', {}, pairs.filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function hyperNodePanel(doc, go) {
  const m = doc.metric;
  const hl = doc.health;
  const root = doc.name === '<cluster>';
  const title = root ? 'The whole cluster' : doc.name;
  const tier = root ? `virtual root · tier ${doc.tier}` : `HyperNode (${doc.group}) · tier ${doc.tier}${doc.tierName ? ` (${doc.tierName})` : ''}`;
  const out = [
    h('h2', { id: 'panel-title', dataset: { kind: 'hypernode', name: doc.name } }, title),
    h('div', { class: 'sub muted' }, tier,
      doc.path.length > 1 ? [' · ', doc.path.slice(0, -1).map((p, i) => [i ? ' › ' : '', link(p === '<cluster>' ? 'cluster' : p, () => go.hyperNode(p))])] : ''),
    h('p', { class: 'figure' }, h('b', {}, `${fmt(m.free)} of ${fmt(m.total)} ${m.label} free`),
      ` · ${fmt(m.used)} used · ${fmt(m.unavailable)} unavailable`),
    stack(m.total, m.used, m.unavailable),
  ];
  if (hl.degraded) out.push(h('div', { class: 'reason-box', id: 'degraded' }, h('b', {}, 'degraded: '), hl.detail));
  if (doc.usable === false && doc.tree) {
    out.push(h('div', { class: 'reason-box' }, h('b', {}, `unusable tree ${doc.tree.name}: `),
      'the scheduler does not place gangs in it', h('ul', {}, doc.tree.reasons.map((r) => h('li', {}, r)))));
  }
  out.push(h('h3', {}, 'Nodes by health'), dl([
    ['nodes', fmt(hl.nodes)],
    ['healthy', fmt(hl.healthy)],
    ['NotReady', hl.notReady ? fmt(hl.notReady) : null],
    ['cordoned', hl.cordoned ? fmt(hl.cordoned) : null],
    ['NoExecute', hl.noExecute ? fmt(hl.noExecute) : null],
    ['missing', doc.missingNodes && doc.missingNodes.length ? `${doc.missingNodes.length} exact members name no Node: ${doc.missingNodes.slice(0, 5).join(', ')}` : null],
  ]));
  out.push(h('h3', {}, 'Resources'), resources(doc.resources));
  if (doc.link) {
    const l = doc.link;
    out.push(h('h3', {}, 'Links'), dl([
      ['medium', l.medium], ['bandwidth', l.bandwidthGBps !== undefined ? `${l.bandwidthGBps} GB/s per GPU` : null],
      ['latency', l.latencyMicroseconds !== undefined ? `${l.latencyMicroseconds} µs` : null],
      ['oversubscription', l.oversubscription !== undefined ? `${l.oversubscription}:1` : null]]));
  }
  if (doc.conditions && doc.conditions.length) {
    out.push(h('h3', {}, 'Conditions'), h('ul', {}, doc.conditions.map((c) =>
      h('li', {}, `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ''}${c.message ? `: ${c.message}` : ''}`))));
  }
  out.push(h('h3', {}, `Gangs inside (${fmt(doc.gangCount)})`));
  if (doc.gangs.length) {
    out.push(h('ul', { class: 'plain gangs-inside' }, doc.gangs.map((g) =>
      h('li', {}, link(g.key, () => go.gang(g.key)), h('span', { class: 'muted' }, ` ${plural(g.pods, 'pod')}`)))));
    if (doc.gangCount > doc.gangs.length) out.push(h('p', { class: 'muted' }, `the ${doc.gangs.length} largest shown`));
  } else {
    out.push(h('p', { class: 'muted' }, 'no pods of any gang run here'));
  }
  if (doc.children.length) {
    out.push(h('h3', {}, `Children (${doc.children.length})`), h('ul', { class: 'plain' },
      doc.children.slice(0, 200).map((c) => h('li', {}, link(c, () => go.hyperNode(c))))));
  }
  if (doc.nodesListed) {
    out.push(h('h3', {}, `Nodes (${doc.nodes.length})`), h('ul', { class: 'plain node-list' },
      doc.nodes.map((n) => h('li', { dataset: { node: n.name } }, link(n.name, () => go.node(n.name)),
        n.state !== 'Ready' ? h('span', { class: 'status pending' }, ` ${n.state}`) : '',
        h('span', { class: 'muted' }, ` ${fmt(n.used)}/${fmt(n.total)}`)))));
  } else {
    out.push(h('p', { class: 'muted' }, `${fmt(hl.nodes)} nodes: zoom into a smaller domain to list them`));
  }
  return out;
}

// A node's inside (tierra.topology.inside): its devices' domains, fastest level first.
function insideList(inside) {
  const items = inside.domains.map((d) => h('li', {},
    h('b', {}, `${d.level} ${d.name}`), d.link ? ` ${d.link}` : '', `: ${d.devices.join(', ')}`,
    d.source !== 'dra' ? h('span', { class: 'muted' }, ` (${d.source})`) : ''));
  if (inside.clique) items.push(h('li', {}, h('b', {}, 'NVLink clique '), inside.clique));
  return [h('h3', {}, 'Inside'), h('ul', { class: 'plain inside-list' }, items)];
}

export function nodePanel(doc, go) {
  const out = [
    h('h2', { id: 'panel-title', dataset: { kind: 'node', name: doc.name } }, doc.name),
    h('div', { class: 'sub muted' }, 'node · ', h('span', { class: `status ${doc.state === 'Ready' ? 'running' : 'pending'}` }, doc.state),
      doc.domains.length ? [' · in ', doc.domains.map((d, i) => [i ? ' › ' : '', link(d.name, () => go.hyperNode(d.name))])] : ' · in no HyperNode'),
    h('h3', {}, 'Resources'), resources(doc.resources),
  ];
  if (doc.inside) out.push(...insideList(doc.inside));
  out.push(h('h3', {}, `Pods (${doc.podList.length})`));
  out.push(doc.podList.length ? h('ul', {}, doc.podList.map((p) =>
    h('li', {}, p.key, ' · ', link(p.gang, () => go.gang(p.gang)), h('span', { class: 'muted' }, ` ${p.phase}`))))
    : h('p', { class: 'muted' }, 'no pods hold resources here'));
  out.push(h('h3', {}, 'Conditions'), h('ul', {}, doc.conditions.map((c) =>
    h('li', {}, `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ''}`))));
  if (doc.unschedulable) out.push(h('p', {}, 'cordoned (spec.unschedulable)'));
  if (doc.taints.length) out.push(h('h3', {}, 'Taints'), h('ul', {}, doc.taints.map((t) => h('li', {}, `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`))));
  out.push(h('h3', {}, 'Labels'), h('ul', { class: 'labels' }, Object.entries(doc.labels).map(([k, v]) => h('li', {}, h('code', {}, `${k}=${v}`)))));
  return out;
}

export function gangPanel(doc, go) {
  const p = doc.pods;
  const out = [
    h('h2', { id: 'panel-title', dataset: { kind: 'gang', name: doc.key } }, doc.key),
    h('div', { class: 'sub muted' }, `${doc.kind} · `, h('span', { class: `status ${doc.status}` }, doc.status),
      ` · ${fmt(p.bound)} of ${plural(p.total, 'pod')} bound`),
    dl([
      ['queue', doc.queue],
      [doc.minimumField || 'minMember', fmt(doc.minMember)],
      ['constraint', doc.constraint],
      ['sub-groups', doc.subGroups.length ? doc.subGroups.map((g) => `${g.name} (${g.size} pods): ${g.constraint}`).join('; ') : null],
      ['achieved', doc.achieved ? achieved(doc.achieved, go) : (p.bound ? null : 'not running')],
    ]),
  ];
  if (doc.reason) out.push(h('div', { class: 'reason-box', id: 'gang-reason' }, h('b', {}, 'waits: '), doc.reason));
  if (doc.wouldPlace) out.push(h('div', { class: 'place-box' }, h('b', {}, 'a session now would bind it '), `within ${doc.wouldPlace}`));
  const where = Object.entries(doc.domains);
  if (where.length) {
    out.push(h('h3', {}, 'Where its pods run'), h('ul', { class: 'plain gang-domains' }, where.slice(0, 60).map(([name, n]) =>
      h('li', {}, link(name, () => go.hyperNode(name)), h('span', { class: 'muted' }, ` ${plural(n, 'pod')}`)))));
  }
  out.push(h('div', { class: 'explain', id: 'explain' }));
  const pods = h('ul', { class: 'plain pod-list' }, doc.podList.map((pod) =>
    h('li', {}, pod.key.split('/')[1], ' ', pod.node ? link(`→ ${pod.node}`, () => go.node(pod.node)) : h('span', { class: 'muted' }, pod.phase))));
  const summary = `Pods (${doc.podList.length}) on ${plural(doc.nodes.length, 'node')}`;
  out.push(doc.podList.length > 16 ? h('details', {}, h('summary', {}, summary), pods) : [h('h3', {}, summary), pods]);
  return out;
}

function achieved(a, go) {
  const name = hyperNodeOf(a);
  const where = name === '<cluster>' ? 'the whole cluster' : name;
  return [link(where, () => go.hyperNode(name)), ` · tier ${a.tier}${a.tierName ? ` (${a.tierName})` : ''}`];
}

export function explainTables(doc, go) {
  const out = [h('h3', {}, 'Explain: every tier it searched'),
    h('p', { class: 'muted' }, 'As a scheduling session now decides it: gangs ahead of it in the queue take their room first.')];
  if (doc.constraint) out.push(h('p', { class: 'muted' }, `constraint: ${doc.constraint}`));
  if (!doc.tiers.length) out.push(h('p', { class: 'muted' }, '(rejected before any domain was searched)'));
  for (const t of doc.tiers) {
    out.push(h('table', { class: 'tier' },
      h('caption', { class: 'muted' }, `tier ${t.tier} · ${t.scope}`),
      h('thead', {}, h('tr', {}, h('th', {}, 'HyperNode'), h('th', {}, 'outcome'), h('th', { class: 'num' }, 'score'), h('th', {}, 'detail'))),
      h('tbody', {}, t.candidates.map((c) => [c, hyperNodeOf(c)]).map(([c, name]) => h('tr', {},
        h('td', {}, name === '<cluster>' ? 'whole cluster' : link(name, () => go.hyperNode(name))),
        h('td', { class: `outcome ${c.outcome}` }, c.outcome),
        h('td', { class: 'num' }, c.score === undefined ? '' : c.score.toFixed(1)),
        h('td', {}, c.detail))),
      t.more ? h('tr', {}, h('td', { colspan: 4, class: 'muted' }, `… ${fmt(t.more)} more: ` +
        t.moreKinds.slice(0, 4).map(([k, n]) => `${fmt(n)} ${k}`).join('; '))) : null)));
  }
  return out;
}
