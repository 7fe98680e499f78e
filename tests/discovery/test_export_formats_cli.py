"""Export to Kueue, KAI, labels and Slurm; ``tierra discover`` and ``tierra export`` as run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from disc_helpers import node
from typer.testing import CliRunner

from tierra.api.hypernode import encode_hypernode
from tierra.api.manifest import dump_yaml
from tierra.api.node import encode_node
from tierra.cli import app
from tierra.discovery.export_formats import (
    export_kai,
    export_kueue,
    export_labels,
    labelled_topologies,
)
from tierra.discovery.ibnetdiscover import discover_ibnetdiscover
from tierra.discovery.labels import discover_labels, make_topology
from tierra.discovery.slurm import discover_slurm

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.output


def test_kueue_and_kai_from_labels() -> None:
    nodes = [node(f"n{i}", {"blk": f"b{i // 4}", "rack": f"r{i // 2 % 2}"}) for i in range(8)]
    hns = discover_labels(nodes, [make_topology("tas", ["blk", "rack"])]).hypernodes
    out = export_kueue(hns, nodes)
    topo = out[0]
    assert topo["apiVersion"] == "kueue.x-k8s.io/v1beta2" and topo["kind"] == "Topology"
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [
        "topology.tierra.dev/tier-2",
        "topology.tierra.dev/tier-1",
        "kubernetes.io/hostname",
    ]
    labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in out[1:]}
    assert labels["n5"] == {
        "topology.tierra.dev/tier-1": "tas-b1-r0",
        "topology.tierra.dev/tier-2": "tas-b1",
    }
    assert len(labels) == 8
    kai = export_kai(hns, nodes)[0]
    assert kai["apiVersion"] == "kai.scheduler/v1alpha1"
    assert [lv.get("alias") for lv in kai["spec"]["levels"]] == ["blk", "rack", None]
    assert export_labels(hns, nodes) == out[1:]


def test_skipped_tiers_and_aliases_on_selene(selene_dump: Path) -> None:
    """MLG01-04's leaf sits directly under the tier-3 core: at tier 2 its nodes get the
    leaf's own value, so the tier-2 domain is exactly that leaf."""
    d = discover_ibnetdiscover([selene_dump])
    (t,) = labelled_topologies(d.hypernodes)
    assert t.keys == tuple(f"topology.tierra.dev/tier-{k}" for k in (3, 2, 1))
    assert t.aliases == ("core", "spine", "leaf")
    assert len(t.labels) == 469
    mgmt = next(
        n for n, v in t.labels.items() if v["topology.tierra.dev/tier-1"] == "ib-t1-mlg01-04"
    )
    assert t.labels[mgmt]["topology.tierra.dev/tier-2"] == "ib-t1-mlg01-04"
    assert t.labels[mgmt]["topology.tierra.dev/tier-3"] == "ib-t3-ccore1-001"
    assert t.labels["luna-0001"] == {
        "topology.tierra.dev/tier-3": "ib-t3-ccore1-001",
        "topology.tierra.dev/tier-2": "ib-t2-cspine1-01",
        "topology.tierra.dev/tier-1": "ib-t1-lg01-01",
    }


def test_several_topologies_get_prefixed_keys(fixtures: Path) -> None:
    d = discover_slurm([fixtures / "slurm" / "slurm-man-topology.yaml"])
    tops = labelled_topologies(d.hypernodes)
    assert [t.name for t in tops] == ["topo1", "topo2"]
    assert tops[0].keys == ("topology.tierra.dev/topo1-tier-2", "topology.tierra.dev/topo1-tier-1")


def write(path: Path, objects: list[dict]) -> Path:  # type: ignore[type-arg]
    path.write_text(dump_yaml(objects))
    return path


def test_discover_cli_labels_preset_and_reconcile(fixtures: Path, tmp_path: Path) -> None:
    kind = yaml.safe_load(
        (fixtures / "k8s-nodes" / "kueue-tas-kind-cluster-node-labels.yaml").read_text()
    )
    workers = [n for n in kind["nodes"] if n["role"] == "worker"]
    names = ["kind-worker"] + [f"kind-worker{i}" for i in range(2, 9)]
    nodes_file = write(
        tmp_path / "nodes.yaml",
        [encode_node(node(n, w["labels"])) for n, w in zip(names, workers, strict=True)],
    )
    topo = fixtures / "k8s-topology-crds" / "kueue-tas-sample-gpu-queues.yaml"
    code, out, _ = run(
        "discover", "labels", str(nodes_file), str(topo), "--preset", "kueue", "-o", "json"
    )
    assert code == 0
    items = json.loads(out)["items"]
    assert sorted(i["metadata"]["name"] for i in items) == [
        "default-b1",
        "default-b1-r1",
        "default-b1-r2",
        "default-b2",
        "default-b2-r1",
        "default-b2-r2",
    ]
    ready = [c for c in items[0]["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"  # the nodes were given, so health is known
    existing = tmp_path / "existing.yaml"
    existing.write_text(out)
    code, out, _ = run(
        "discover",
        "labels",
        str(nodes_file),
        str(topo),
        "--preset",
        "kueue",
        "--reconcile",
        str(existing),
        "-o",
        "json",
    )
    assert code == 0
    plan = json.loads(out)["items"][0]
    assert (plan["kind"], plan["writes"], plan["unchanged"]) == ("DiscoveryPlan", 0, 6)


def test_discover_cli_errors(fixtures: Path, tmp_path: Path) -> None:
    code, _, out = run("discover", "nope", "x")
    assert code == 2 and "unknown source" in out
    code, _, out = run("discover", "slurm", str(tmp_path / "missing.conf"))
    assert code == 2 and "no such file" in out
    bad = tmp_path / "topology.conf"
    bad.write_text("SwitchName=s0 Nodes=n[1-\n")
    code, _, out = run("discover", "slurm", str(bad))
    assert code == 2 and "line 1" in out and "Traceback" not in out
    code, _, out = run("discover", "labels", str(bad))
    assert code == 2 and "--levels" in out
    code, _, out = run(
        "discover",
        "ibnetdiscover",
        str(fixtures / "ibnetdiscover" / "superbench-azure-hdr-director-full.out"),
    )
    assert code == 2 and "line 10" in out


def test_discover_cli_bad_health_nodes(fixtures: Path, tmp_path: Path) -> None:
    """A --nodes Node with a bad field is exit 2: it was dropped to a default before, so a
    node written ``unschedulable: maybe`` counted as schedulable in the health roll-up."""
    bad = tmp_path / "nodes.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: hca1}\nspec: {unschedulable: maybe}\n"
    )
    dump = fixtures / "ibnetdiscover" / "ibsim-net-2sw-2hca-minimal.out"
    code, stdout, out = run("discover", "ibnetdiscover", str(dump), "--nodes", str(bad))
    assert code == 2 and stdout == ""
    assert "Node/hca1: spec.unschedulable: expected true or false" in out


def test_discover_cli_owner_must_be_a_label_value(fixtures: Path) -> None:
    """The owner is the managed-by label's value; 'bad owner!' printed objects the API
    server would reject."""
    dump = fixtures / "ibnetdiscover" / "ibsim-net-2sw-2hca-minimal.out"
    code, stdout, out = run("discover", "ibnetdiscover", str(dump), "--owner", "bad owner!")
    assert code == 2 and stdout == "" and "is not a label value" in out
    code, stdout, _ = run("discover", "ibnetdiscover", str(dump), "--owner", "fabric_a.1")
    assert code == 0 and "managed-by: fabric_a.1" in stdout


def test_discover_cli_in_node_sources(fixtures: Path) -> None:
    code, out, _ = run(
        "discover",
        "nvidia-smi",
        str(fixtures / "gpu-topo" / "nvidia-smi-topo-a100-8gpu-nv12.txt"),
        "--node",
        "gpu-a",
    )
    assert code == 0
    (patch,) = list(yaml.safe_load_all(out))
    assert patch["kind"] == "Node" and patch["metadata"]["name"] == "gpu-a"
    assert "nvlink" in patch["metadata"]["annotations"]["topology.tierra.dev/node-topology"]
    code, out, _ = run(
        "discover",
        "dra",
        str(fixtures / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"),
    )
    assert code == 0 and "gpu-node-1" in out


def test_export_cli_formats(fixtures: Path, tmp_path: Path) -> None:
    d = discover_slurm([fixtures / "slurm" / "topograph-expected-tree-3tier.conf"])
    hn_file = write(tmp_path / "hns.yaml", [encode_hypernode(h) for h in d.hypernodes])
    code, out, _ = run("export", "slurm-conf", str(hn_file))
    assert code == 0 and "SwitchName=switch.3.1 Switches=switch.2.[1-6]" in out
    assert "SwitchName=switch.1.1 Nodes=srv[1101-1108]" in out
    code, out, _ = run("export", "kueue", str(hn_file), "-o", "json")
    assert code == 0 and json.loads(out)["items"][0]["kind"] == "Topology"
    code, out, _ = run("export", "kai", str(hn_file))
    assert code == 0 and "kai.scheduler/v1alpha1" in out
    code, out, _ = run("export", "slurm-yaml", str(hn_file))
    assert code == 0 and yaml.safe_load(out)[0]["tree"]["switches"]
    code, _, out = run("export", "bogus", str(hn_file))
    assert code == 2 and "slurm-conf" in out


@pytest.mark.parametrize("fmt", ["volcano", "tierra"])
def test_existing_formats_untouched(fmt: str, fixtures: Path, tmp_path: Path) -> None:
    d = discover_slurm([fixtures / "slurm" / "slurm-testsuite-block-8x4.conf"])
    hn_file = write(tmp_path / "hns.yaml", [encode_hypernode(h) for h in d.hypernodes])
    code, out, _ = run("export", fmt, str(hn_file))
    assert code == 0 and out.count("kind: HyperNode") == 15


def test_several_level_lists_and_a_preset(tmp_path: Path) -> None:
    nodes = [
        node(f"n{i}", {"rack": f"r{i // 2}", "zone": "z", "nvidia.com/gpu.clique": "c.1"})
        for i in range(4)
    ]
    nodes_file = write(tmp_path / "nodes.yaml", [encode_node(n) for n in nodes])
    code, out, _ = run(
        "discover",
        "labels",
        str(nodes_file),
        "--levels",
        "net=zone,rack",
        "--levels",
        "geo=zone",
        "--preset",
        "nvidia-clique",
        "-o",
        "json",
    )
    assert code == 0
    names = sorted(i["metadata"]["name"] for i in json.loads(out)["items"])
    assert names == ["geo-z", "net-z", "net-z-r0", "net-z-r1", "nvlink-c.1"]
    code, _, err = run(
        "discover", "labels", str(nodes_file), "--levels", "a=rack", "--levels", "a=zone"
    )
    assert code == 2 and "share a name" in err
