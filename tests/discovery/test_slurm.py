"""Slurm topology.conf / topology.yaml: import, export, round trips, hostlists, errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from disc_helpers import by_name, children_of, nodes_of
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.discovery import ParseError
from tierra.discovery.export_formats import export_slurm_conf, export_slurm_yaml
from tierra.discovery.hostlist import HostlistError, compress, expand
from tierra.discovery.slurm import Topology, discover_slurm, parse_conf, parse_yaml

SLURM = "slurm"


def fx(fixtures: Path, name: str) -> Path:
    return fixtures / SLURM / name


def shape(hns: tuple) -> set[tuple[str, int, tuple[str, ...], tuple[str, ...]]]:  # type: ignore[type-arg]
    return {(h.name, h.tier, tuple(children_of(h)), tuple(nodes_of(h))) for h in hns}


@pytest.mark.parametrize(
    ("name", "tiers"),
    [
        # 500 "Nodes=" lines (leaves), 26 grp switches, im0/im1, root
        ("slurm-testsuite-tree-4level-500leaf.conf", {1: 500, 2: 26, 3: 2, 4: 1}),
        # root = im0 (tier 3) + grp23..35 (tier 2): tier 4, one tier-3 switch
        ("slurm-testsuite-tree-unbalanced.conf", {1: 500, 2: 26, 3: 1, 4: 1}),
        # spineA{leafA1,A2}, spineB{leafB1,B2}, leafC alone
        ("slurm-testsuite-tree-disconnected-trunks.conf", {1: 5, 2: 2}),
        # 12 leaves of 8 srv nodes, 6 spines of 2 leaves, 1 core
        ("topograph-expected-tree-3tier.conf", {1: 12, 2: 6, 3: 1}),
        # 8 blocks of 4, BlockSizes=4,8,16,32,64: x2 (4), x4 (2), x8 (1); x16 needs 16 blocks
        ("slurm-testsuite-block-8x4.conf", {1: 8, 2: 4, 3: 2, 4: 1}),
        # 12 NVL blocks of 8, BlockSizes=8,16,32: x2 (6), x4 (3)
        ("topograph-expected-block-nvl.conf", {1: 12, 2: 6, 3: 3}),
        # s0..s3 leaves; s4..s7 all parent all four leaves: merged into one tier-2
        ("slurm-doc-tree-linkspeed.conf", {1: 4, 2: 1}),
    ],
)
def test_fixture_shapes_and_round_trip(
    fixtures: Path, tmp_path: Path, name: str, tiers: dict[int, int]
) -> None:
    path = fx(fixtures, name)
    d = discover_slurm([path])
    assert Counter(h.tier for h in d.hypernodes) == tiers
    # Round trip: HyperNodes -> topology.conf -> HyperNodes gives the same HyperNodes,
    # and the same Slurm topology (switches, children, nodes, block order and sizes).
    text = export_slurm_conf(d.hypernodes)
    again_path = tmp_path / "topology.conf"
    again_path.write_text(text)
    again = discover_slurm([again_path])
    assert shape(again.hypernodes) == shape(d.hypernodes)
    before, after = parse_conf(path.read_text()), parse_conf(text)
    assert before.plugin == after.plugin
    if before.plugin == "tree":

        def switches(t: Topology) -> set[tuple[str, frozenset[str], frozenset[str], str | None]]:
            return {
                (s.name, frozenset(s.switches), frozenset(s.nodes), s.link_speed)
                for s in t.switches
            }

        assert switches(before) == switches(after)
    else:
        assert [(b.name, b.nodes) for b in before.blocks] == [
            (b.name, b.nodes) for b in after.blocks
        ]
        assert before.block_sizes == after.block_sizes


def test_tree_details(fixtures: Path) -> None:
    big = by_name(
        discover_slurm([fx(fixtures, "slurm-testsuite-tree-4level-500leaf.conf")]).hypernodes
    )
    # leaf100 holds peta[10000-10019]; the 500 leaves hold 10,000 nodes in all
    assert nodes_of(big["slurm-leaf100"]) == [f"peta{n}" for n in range(10000, 10020)]
    assert sum(len(nodes_of(h)) for h in big.values() if h.tier == 1) == 10_000
    assert children_of(big["slurm-root"]) == ["slurm-im0", "slurm-im1"]
    unbalanced = by_name(
        discover_slurm([fx(fixtures, "slurm-testsuite-tree-unbalanced.conf")]).hypernodes
    )
    assert len(children_of(unbalanced["slurm-root"])) == 14  # im0 and grp23..grp35
    doc = discover_slurm([fx(fixtures, "slurm-doc-tree-linkspeed.conf")])
    spine = by_name(doc.hypernodes)["slurm-s4"]
    assert spine.meta.annotations["topology.tierra.dev/source-name"] == "s4,s5,s6,s7"
    assert children_of(spine) == ["slurm-s0", "slurm-s1", "slurm-s2", "slurm-s3"]
    assert "merged" in str(doc.notes[0])


def test_topology_yaml(fixtures: Path, tmp_path: Path) -> None:
    """topology.yaml(5)'s example: topo1 tree (sw_root over s1, s2), topo2 blocks b1..b4
    of 4 with block_sizes [4, 16] (one aggregate of all four), topo3/topo3a flat, topo4
    ring and topo5 torus3d skipped with notes."""
    d = discover_slurm([fx(fixtures, "slurm-man-topology.yaml")])
    hns = by_name(d.hypernodes)
    assert sorted(hns) == [
        "slurm-topo1-s1",
        "slurm-topo1-s2",
        "slurm-topo1-sw-root",
        "slurm-topo2-b1",
        "slurm-topo2-b1-x4",
        "slurm-topo2-b2",
        "slurm-topo2-b3",
        "slurm-topo2-b4",
    ]
    assert nodes_of(hns["slurm-topo1-s2"]) == ["node03", "node04"]
    assert children_of(hns["slurm-topo2-b1-x4"]) == [f"slurm-topo2-b{i}" for i in range(1, 5)]
    assert len(d.notes) == 4
    text = export_slurm_yaml(d.hypernodes)
    out = tmp_path / "topology.yaml"
    out.write_text(text)
    again = discover_slurm([out])
    assert shape(again.hypernodes) == shape(d.hypernodes)
    topos, _ = parse_yaml(text)
    assert [(t.name, t.plugin) for t in topos] == [("topo1", "tree"), ("topo2", "block")]
    assert topos[1].block_sizes == [4, 16]
    with pytest.raises(Exception, match="one topology"):
        export_slurm_conf(d.hypernodes)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("SwitchName=s0 Nodes=n[1-2]\nSwitchNme=s1 Nodes=n3\n", 2, "unknown key"),
        ("SwitchName=s0 Nodes=n[1-2\n", 1, "unclosed"),
        ("SwitchName=s0 Nodes=n[2-1]\n", 1, "backwards"),
        ("SwitchName=s0 Switches=s9\n", 1, "never defined"),
        ("SwitchName=s0 Nodes=n1\nBlockName=b1 Nodes=n2\n", 2, "block line in a tree"),
        ("SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n", 2, "defined twice"),
        ("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", 1, "cycle"),
        ("# c\nSwitchName=s0 Nodes=n1 \\\n", 2, "continued line"),
        ("SwitchName=s0 garbage\n", 1, "Key=Value"),
        ("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,6\n", 2, "power-of-two"),
        ("SwitchName=s0 Nodes=Node_1\n", 1, "Kubernetes node"),
    ],
)
def test_conf_errors_name_the_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_conf(text, "topology.conf")
    assert err.value.line == line and message in str(err.value)
    assert "topology.conf" in str(err.value)


@pytest.mark.parametrize("text", ["", "[]\n", "# nothing\n"])
def test_empty_yaml_is_an_error_like_an_empty_conf(text: str) -> None:
    """Read as 'no topology', an empty file would let a reconcile delete every HyperNode."""
    with pytest.raises(ParseError, match="expected a list of topologies") as err:
        parse_yaml(text, "topology.yaml")
    assert err.value.line == 1


def test_truncated_fixture(fixtures: Path) -> None:
    """The 500-leaf file cut in the middle of a hostlist fails at that line."""
    lines = fx(fixtures, "slurm-testsuite-tree-4level-500leaf.conf").read_text().splitlines()
    cut = "\n".join(lines[:100]) + "\n" + lines[100][: lines[100].index("[") + 4]
    with pytest.raises(ParseError) as err:
        parse_conf(cut, "cut.conf")
    assert err.value.line == 101


def test_yaml_errors_name_the_line() -> None:
    with pytest.raises(ParseError) as err:
        parse_yaml(
            "- topology: t\n  tree:\n    switches:\n    - switch: s1\n      nodes: n[1-\n", "t.yaml"
        )
    assert err.value.line == 4 and "unclosed" in str(err.value)
    with pytest.raises(ParseError) as err:
        parse_yaml("- topology: t\n  tree: {switches: [\n", "t.yaml")
    assert err.value.line is not None and "invalid YAML" in str(err.value)


def test_hostlists() -> None:
    assert expand("gpu[001-003,100]") == ["gpu001", "gpu002", "gpu003", "gpu100"]
    assert expand("tux[0-1],login1") == ["tux0", "tux1", "login1"]
    assert expand("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand("switch.1.[1-2]") == ["switch.1.1", "switch.1.2"]
    assert compress(["n10", "n8", "n9", "n11"]) == "n[8-11]"
    assert compress(["gpu001", "gpu002", "gpu064", "gpu100"]) == "gpu[001-002,064],gpu100"
    # a superscript digit is isdigit() but not a number: it sorts as text, no crash
    assert compress(["a1²2", "a1²1"]) == "a1²[1-2]"
    for bad in ("n[1-2", "n1-2]", "n[a-b]", "n[[1]]"):
        with pytest.raises(HostlistError):
            expand(bad)


@settings(max_examples=60, deadline=None)
@given(
    st.sets(
        st.tuples(
            st.sampled_from(["n", "gpu", "rack1-n", "a.b"]),
            st.integers(0, 300),
            st.sampled_from([0, 3]),
            st.sampled_from(["", "-ib"]),
        ),
        max_size=40,
    )
)
def test_compress_expand_round_trip(items: set[tuple[str, int, int, str]]) -> None:
    names = {f"{p}{str(n).zfill(w)}{s}" for p, n, w, s in items}
    assert set(expand(compress(names))) == names
    assert len(expand(compress(names))) == len(names)
