// The JSON API (documented in docs/dashboard.md); every figure on the page comes through here.

export class ApiError extends Error {}

export async function get(path) {
  let response;
  try {
    response = await fetch(path, { headers: { Accept: 'application/json' } });
  } catch (err) {
    throw new ApiError(`the dashboard server is unreachable (${err.message})`);
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body.error) message = body.error;
    } catch (_) { /* not JSON */ }
    throw new ApiError(`${path}: ${message}`);
  }
  return response.json();
}

export const enc = encodeURIComponent;

export function gangPath(key) {
  const [ns, name] = key.split('/');
  return `/api/gangs/${enc(ns)}/${enc(name)}`;
}

// What the page calls a HyperNode named in a `hyperNode` field (an achieved domain, an explain
// candidate): the name, or `group/name` where the JSON adds `hyperNodeGroup` (both API groups
// hold the name), as the topology's `domains.name` and /api/hypernodes/ call it.
export function hyperNodeOf(o) {
  return o.hyperNodeGroup ? `${o.hyperNodeGroup}/${o.hyperNode}` : o.hyperNode;
}
