"""Properties: every source's output is a valid forest; labels discovery is deterministic,
puts each node in at most one leaf per topology and mirrors the labels; names are DNS-safe."""

from __future__ import annotations

from pathlib import Path

import pytest
from disc_helpers import DATA, node, nodes_of
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.api.meta import dns_subdomain_problem
from tierra.api.snapshot import read_documents
from tierra.discovery import naming
from tierra.discovery.dra import discover_dra, slices_from_documents
from tierra.discovery.ibnetdiscover import discover_ibnetdiscover
from tierra.discovery.labels import discover_labels, make_topology
from tierra.discovery.slurm import discover_slurm
from tierra.discovery.ufm import discover_ufm
from tierra.errors import InputError, Severity
from tierra.topology.index import TopologyIndex


def errors(hns: object) -> list[str]:
    index = TopologyIndex.build([], hns)  # type: ignore[arg-type]
    return [str(p) for p in index.problems if p.severity is Severity.ERROR]


def test_every_source_gives_a_valid_forest(fixtures: Path, selene_dump: Path) -> None:
    """No cycles, one parent each, parent tier above child, no node twice in a tree, one
    tier per tier name: what ``tierra validate`` checks, on every real input."""
    f = fixtures
    outputs = [
        discover_ibnetdiscover([selene_dump]),
        discover_ibnetdiscover([f / "ibnetdiscover" / "topograph-dgx-ndr-40sw-582ca.out"]),
        discover_ibnetdiscover([f / "ibnetdiscover" / "selene-storage-edr-hdr.out"]),
        discover_ibnetdiscover([f / "ibnetdiscover" / "ufm-ndt-putty-log-tabs-stripped.out.gz"]),
        discover_ufm((f / "ufm" / "volcano-mock-ufmRest-resources-ports.json").read_text()),
        discover_dra(
            slices_from_documents(
                read_documents(DATA / "aicr-h100-resourceslices-gpu-node-1.yaml"), []
            )
        ),
        *(discover_slurm([p]) for p in sorted((f / "slurm").iterdir())),
    ]
    for d in outputs:
        assert errors(d.hypernodes) == [], d.source
        for h in d.hypernodes:
            assert dns_subdomain_problem(h.name) is None


label_values = st.sampled_from(["a", "b", "B_1", "x.y", "rack 7", "-z-", ""])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {}, optional={"zone": label_values, "block": label_values, "rack": label_values}
        ),
        min_size=1,
        max_size=25,
    )
)
def test_label_discovery_properties(label_sets: list[dict[str, str]]) -> None:
    nodes = [node(f"n{i}", labels) for i, labels in enumerate(label_sets)]
    topo = make_topology("t", ["zone", "block", "rack"])
    if not any("rack" in n.labels for n in nodes):
        # no leaf at all: an error naming the label, never an empty result
        with pytest.raises(InputError, match="narrowest label rack"):
            discover_labels(nodes, [topo])
        return
    d = discover_labels(nodes, [topo])
    assert errors(d.hypernodes) == []
    # deterministic, whatever the node order
    again = discover_labels(list(reversed(nodes)), [topo])
    assert again.hypernodes == d.hypernodes
    # a node is in a leaf exactly when it carries the narrowest label
    placed = [n for h in d.hypernodes for n in nodes_of(h)]
    assert len(placed) == len(set(placed))
    assert set(placed) == {n.name for n in nodes if "rack" in n.labels}
    # every leaf's nodes share their label path
    for h in d.hypernodes:
        members = [n for n in nodes if n.name in nodes_of(h)]
        paths = {tuple(n.labels.get(k) for k in ("zone", "block", "rack")) for n in members}
        assert len({p[2] for p in paths}) <= 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_names_are_dns_subdomains(text: str) -> None:
    name = naming.join("p", text)
    assert dns_subdomain_problem(name) is None
    assert naming.join("p", text) == name
    assert len(naming.label_value(text)) <= 63
