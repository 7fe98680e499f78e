"""A pod made from its template is the pod a full decode makes (``pod_templates``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.api import pod_templates
from tierra.api.pod import decode_pod
from tierra.api.snapshot import load_snapshot
from tierra.kube.scheduler import decode

TOKEN = {"projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
SPEC_PARTS: dict[str, list[Any]] = {
    "tolerations": [
        [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "a", "effect": "Sometimes"}],  # a problem: never shared
    ],
    "affinity": [
        {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
                ]
            }
        },
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
    ],
    "topologySpreadConstraints": [
        [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
                "matchLabelKeys": ["app"],
            }
        ],
    ],
    "priority": [7, "high"],
    "nodeSelector": [{"zone": "a"}],
    "schedulingGates": [[{"name": "wait"}]],
    "resourceClaims": [[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]],
}
VOLUMES = [
    None,
    "token",  # a per-pod name, as the ServiceAccount admission plugin gives
    [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}],
    [{"name": "far", "nfs": {"server": "x", "path": "/"}}],
]


def raw_pod(  # noqa: PLR0917 (the tuples hypothesis draws)
    name: str,
    node: str,
    spec_parts: dict[str, Any],
    volumes: Any,
    meta: dict[str, Any],
    status: dict[str, Any] | None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "x",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}},
    }
    spec: dict[str, Any] = {"schedulerName": "tierra", "containers": [container]}
    spec.update(copy.deepcopy(spec_parts))
    if volumes == "token":
        volumes = [{"name": f"kube-api-access-{name}", **TOKEN}]
        container["volumeMounts"] = [{"name": f"kube-api-access-{name}", "mountPath": "/s"}]
    if volumes is not None:
        spec["volumes"] = copy.deepcopy(volumes)
    if node:
        spec["nodeName"] = node
    out = {"metadata": {"name": name, "namespace": "default", **copy.deepcopy(meta)}, "spec": spec}
    if status is not None:
        out["status"] = dict(status)
    return out


spec_parts = st.fixed_dictionaries(
    {}, optional={k: st.sampled_from(v) for k, v in SPEC_PARTS.items()}
)
metas = st.fixed_dictionaries(
    {},
    optional={
        "labels": st.sampled_from([{"app": "x"}, {"app": "y", "zone": "a"}, {"n": 3}, [], None]),
        "namespace": st.sampled_from(["team", None, 7]),
        "annotations": st.sampled_from(
            [
                {"scheduling.k8s.io/group-name": "g"},
                {"kueue.x-k8s.io/pod-group-name": "g"},  # a Kueue group: decoded in full
                {"kueue.x-k8s.io/podset-required-topology": "zone"},
            ]
        ),
        "creationTimestamp": st.sampled_from(
            ["2026-01-01T00:00:00Z", "2026-01-01t00:00:01z", "2026-01-01T00:00:02", "yesterday", 5]
        ),
        "uid": st.sampled_from(["u-1", 1]),
        "managedFields": st.just([{"manager": "kubectl"}]),
    },
)
statuses = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "phase": st.sampled_from(["Running", "Pending", "Succeeded", "Sleeping", ""]),
            "nominatedNodeName": st.just("n9"),
            "podIP": st.just("10.0.0.1"),
        },
    ),
)
pods = st.tuples(
    st.sampled_from(["p1", "p2"]),
    st.sampled_from(["", "n1", "n2"]),
    spec_parts,
    st.sampled_from(VOLUMES),
    metas,
    statuses,
)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    pod_templates._templates.clear()


def full(raw: dict[str, Any]) -> decode.LivePod:
    """What the scheduler made of ``raw`` before templates."""
    md = raw.get("metadata") or {}
    return decode.LivePod(
        decode.decoded(decode_pod, raw)[0],
        decode._time(md.get("creationTimestamp")),
        bool(md.get("deletionTimestamp")),
        decode._pod_scheduled_false(raw),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(pods, min_size=2, max_size=6))
def test_every_pod_is_the_pod_a_full_decode_makes(batch: list[Any]) -> None:
    for args in batch:
        raw = raw_pod(*args)
        assert decode.pod(copy.deepcopy(raw)) == full(raw)


def test_replicas_share_one_template_even_with_their_own_token_volume(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = []
    original = pod_templates.from_template

    def counted(key: bytes | None, raw: Any) -> Any:
        pod = original(key, raw)
        made.append(pod is not None)
        return pod

    monkeypatch.setattr(pod_templates, "from_template", counted)
    raws = [
        raw_pod(f"p{i}", f"n{i % 3}", {}, "token", {"labels": {"i": str(i)}}, None)
        for i in range(20)
    ]
    got = [decode.pod(r) for r in raws]
    assert len(pod_templates._templates) == 1
    assert made == [False] + [True] * 19
    assert [g.pod.node_name for g in got] == [f"n{i % 3}" for i in range(20)]
    assert [g.pod.meta.labels for g in got] == [{"i": str(i)} for i in range(20)]
    assert got == [full(r) for r in raws]


@pytest.mark.parametrize(
    ("parts", "volumes"),
    [
        ({"affinity": SPEC_PARTS["affinity"][0]}, None),  # rules read the pod's labels
        ({"tolerations": SPEC_PARTS["tolerations"][1]}, None),  # a problem
        ({"resourceClaims": SPEC_PARTS["resourceClaims"][0]}, None),
        ({}, VOLUMES[3]),  # an ephemeral claim is named after the pod
    ],
)
def test_pods_with_rules_claims_or_problems_keep_no_template(
    parts: dict[str, Any], volumes: Any
) -> None:
    decode.pod(raw_pod("p1", "n1", parts, volumes, {}, None))
    assert pod_templates._templates == {}


def test_a_snapshot_loads_the_same_pods_origins_and_problems_with_templates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = [
        raw_pod(f"p{i}", f"n{i % 2}", parts, vol, meta, status)
        for i, (parts, vol, meta, status) in enumerate(
            [
                ({}, "token", {"labels": {"a": "b"}}, {"phase": "Running"}),
                ({}, "token", {"managedFields": [{"m": 1}]}, {"phase": "Running"}),
                ({}, "token", {"creationTimestamp": "yesterday"}, None),
                ({"tolerations": SPEC_PARTS["tolerations"][1]}, None, {}, None),
                ({"tolerations": SPEC_PARTS["tolerations"][1]}, None, {}, None),
                ({}, "token", {}, {"phase": "Sleeping"}),
                ({}, "token", {"uid": "u"}, {"phase": "Succeeded"}),
            ]
        )
    ]
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Pod", **d} for d in docs]))
    shared = load_snapshot([path])
    monkeypatch.setattr(pod_templates, "_templates", {})
    monkeypatch.setattr(pod_templates, "remember", lambda key, pod, problems: None)
    alone = load_snapshot([path])
    assert shared.pods == alone.pods and shared.problems == alone.problems
    assert [p.origin for p in shared.pods] == [p.origin for p in alone.pods]
    assert [p.meta.extra for p in shared.pods] == [p.meta.extra for p in alone.pods]
