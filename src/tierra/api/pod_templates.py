"""Pods made from one template are decoded once: the rest reuse what their spec gave.

A cluster's pods come by the thousand from a few templates (a Deployment's ReplicaSet, a
DaemonSet, a Job): their specs differ in ``nodeName`` and, on clusters with the
ServiceAccount admission plugin, in the name of the projected token volume and its
mounts, none of which the scheduler reads. Decoding a spec (requests, tolerations,
affinity, rules) was most of a listed pod's cost (a million pods: about half of the time
to the first decision), so a pod whose spec, once the parts nobody reads are left out,
matches one decoded before without a problem takes that pod's spec-derived fields and
decodes only its metadata, node and phase. Used where pods come by the hundred
thousand: the live scheduler's lists (``kube.scheduler.decode``, lean metadata) and
snapshot files (``snapshot.load_snapshot``, all of it).

What is left out of the key, and why that cannot change the decoded pod:

* ``spec.nodeName``: set on the pod from the pod itself;
* ``spec.volumes`` when every volume is node-local (``pod_rules``: a ConfigMap, a Secret,
  the token, ...), and then the containers' ``volumeMounts``: such volumes give the pod no
  rules (``decode_rules`` reads only claims and volumes it cannot follow).

A template is kept only if its pod has no placement rules (the rules read the pod's name
and labels, which are not in the key), no resource claims, no nominated node, and
decoding it found no problem (problems are reported with each pod that has them). A pod
whose metadata or phase has a problem, or that is in a Kueue pod group (whose problems
come from its annotations), is decoded in full.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

import msgspec

from tierra.api import decode as api_decode
from tierra.api.fields import Fields, Report
from tierra.api.kueue import read_topology
from tierra.api.kueue_pod_group import in_group as in_kueue_group
from tierra.api.meta import ObjectMeta, decode_meta, object_ref, parse_time
from tierra.api.pod import Phase, Pod, decode_pod
from tierra.api.pod_rules import _NODE_LOCAL_VOLUMES
from tierra.errors import Origin, Problem

_KEPT = 4096  # templates kept; a cluster has far fewer (then the table starts over)
_LOCAL = _NODE_LOCAL_VOLUMES | {"name"}
_PHASES = {p.value: p for p in Phase}
_encode = msgspec.json.Encoder().encode
# the template pod's init fields by name (``dataclasses.replace`` looks them up anew for
# every pod: a third of a shared pod's cost)
_templates: dict[bytes, dict[str, Any]] = {}
_stamps: dict[str, float] = {}  # creationTimestamp -> seconds (pods come in bursts)
_INIT = tuple(f.name for f in fields(Pod) if f.init)


def template_key(raw: Mapping[str, Any]) -> bytes | None:
    """The key of ``raw``'s template, or None when the pod is not one to share."""
    spec = raw.get("spec")
    status = raw.get("status")
    if not isinstance(spec, dict) or (
        isinstance(status, Mapping)
        and (status.get("nominatedNodeName") or status.get("resourceClaimStatuses"))
    ):
        return None
    rest = {k: v for k, v in spec.items() if k != "nodeName"}
    volumes = rest.get("volumes")
    if isinstance(volumes, list) and all(
        isinstance(v, Mapping) and _LOCAL.issuperset(v) for v in volumes
    ):
        del rest["volumes"]
        for group in ("containers", "initContainers"):
            items = rest.get(group)
            if isinstance(items, list):
                rest[group] = [
                    {k: v for k, v in c.items() if k != "volumeMounts"}
                    if isinstance(c, dict)
                    else c
                    for c in items
                ]
    try:
        return _encode(rest)
    except (TypeError, msgspec.EncodeError):  # not JSON (a test's odd value): no sharing
        return None


def remember(key: bytes | None, pod: Pod, problems: tuple[Problem, ...]) -> None:
    """Keep ``pod`` as its template's, if it may be shared (see the module's docstring)."""
    if key is None or problems or pod.rules is not None or pod.resource_claims:
        return
    if len(_templates) >= _KEPT:
        _templates.clear()
    _templates[key] = {name: getattr(pod, name) for name in _INIT}


def from_template(
    key: bytes | None, raw: Mapping[str, Any], origin: Origin | None = None, *, lean: bool = True
) -> Pod | None:
    """The pod ``raw`` decodes to, made from its template; None when there is none or the
    pod needs a full decode (its metadata, node or phase has a problem; a Kueue group).
    ``lean``: its metadata as ``api.decode.Meta.LEAN`` keeps it (the live scheduler);
    otherwise all of it, as a snapshot file's (``ObjectMeta.extra`` included)."""
    template = _templates.get(key) if key is not None else None
    if template is None:
        return None
    meta = _plain_meta(raw.get("metadata")) if lean else None
    if meta is None:
        trimmed = api_decode.trim(raw) if lean else raw
        sink: list[Problem] = []
        report = Report(origin, object_ref(trimmed, "Pod", namespaced=True), sink)
        meta = decode_meta(Fields(trimmed, "", report), namespaced=True)
        if sink:
            return None
        if lean and meta.extra:
            meta = replace(meta, extra={})
    if read_topology(meta.annotations)[1] or in_kueue_group(meta):
        return None
    status = raw.get("status")
    if status is None:
        status = {}
    elif not isinstance(status, Mapping):
        return None
    phase = _PHASES.get(status.get("phase", "Pending"))
    node = raw["spec"].get("nodeName", "")
    if phase is None or not isinstance(node, str):
        return None
    return Pod(**{**template, "meta": meta, "node_name": node, "phase": phase, "origin": origin})


def decode_pod_shared(raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]) -> Pod:
    """``decode_pod``, a pod of a template seen before made from it (a snapshot's)."""
    key = template_key(raw)
    pod = from_template(key, raw, origin, lean=False)
    if pod is None:
        before = len(sink)
        pod = decode_pod(raw, origin, sink)
        remember(key, pod, tuple(sink[before:]))
    return pod


def _plain_meta(md: object) -> ObjectMeta | None:
    """``decode_meta`` of the lean metadata, for metadata it would find nothing wrong
    with and change nothing in (strings where strings go, a creation time it reads); None
    for anything else, which ``decode_meta`` then decodes (its field-by-field checks were
    a third of a shared pod's cost)."""
    if not isinstance(md, dict):
        return None
    name = md.get("name")
    namespace = md.get("namespace", "default")
    uid = md.get("uid", "")
    if not (isinstance(name, str) and isinstance(namespace, str) and isinstance(uid, str)):
        return None
    labels = _strings(md.get("labels"))
    annotations = _strings(md.get("annotations"))
    if labels is None or annotations is None:
        return None
    for dropped in api_decode.DROPPED_ANNOTATIONS:
        if dropped in annotations:
            annotations = {k: v for k, v in annotations.items() if k != dropped}
    stamp = md.get("creationTimestamp")
    created = None
    if stamp is not None:
        created = _stamps.get(stamp) if isinstance(stamp, str) else None
        if created is None:
            created = parse_time(stamp)
            if created is None:
                return None
            if len(_stamps) >= _KEPT:
                _stamps.clear()
            _stamps[stamp] = created
    return ObjectMeta(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        created=created,
    )


def _strings(value: object) -> dict[str, str] | None:
    """A copy of a map of strings (``Fields.str_map`` of one); None if it is not one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        return None
    for v in value.values():
        if type(v) is not str:
            return None
    return dict(value)
