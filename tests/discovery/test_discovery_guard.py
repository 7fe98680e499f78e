"""Discovery never plans to delete everything by accident, as a user meets it on the CLI.

A source that finds no hosts or no domains is exit 2 with the reason; a reconcile plan
deleting more than a share of the owner's HyperNodes (default half) is refused unless
``--allow-mass-delete``; a host pattern that misses some descriptions, or host names
that stand for several machines, are reported with the pattern and examples.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from disc_helpers import node

from run_cli import one_line, run
from tierra.api.hypernode import VOLCANO_GROUP, HyperNode
from tierra.api.manifest import dump_yaml
from tierra.api.node import encode_node
from tierra.discovery import reconcile
from tierra.discovery.result import hypernode
from tierra.errors import ConfigError


def ib(fixtures: Path, name: str) -> Path:
    return fixtures / "ibnetdiscover" / name


# -- sources that find nothing -----------------------------------------------------------------


def test_a_dump_with_one_ca_and_no_switch_is_an_error(fixtures: Path) -> None:
    """topograph's example-bad.out: one GB200 HCA, no switch. It gave zero HyperNodes and
    exit 0, so ``--reconcile`` planned to delete every owned HyperNode."""
    dump = ib(fixtures, "topograph-gb200-single-ca-only.out")
    code, out, err = run("discover", "ibnetdiscover", dump)
    assert (code, out) == (2, "")
    assert "topograph-gb200-single-ca-only.out: found no hosts: 1 CA(s) and no switch" in (
        one_line(err)
    )
    code, out, err = run("discover", "ibnetdiscover", dump, "--reconcile", dump)
    assert (code, out) == (2, "") and "found no hosts" in err


def test_a_host_pattern_matching_no_host_is_an_error_naming_it(fixtures: Path) -> None:
    code, out, err = run(
        "discover", "ibnetdiscover", ib(fixtures, "ibsim-net-2sw-2hca-minimal.out"),
        "--host-pattern", r"^node-(\d+)",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert (
        r"found no hosts: the host pattern '^node-(\d+)' matched none of the 2 description(s)"
        " of CAs cabled to a switch, such as 'Hca1', 'Hca2'"
    ) in one_line(err)


def test_default_descriptions_only_say_so(fixtures: Path) -> None:
    """A 2007 dump whose four HCAs all kept the vendor's description names no host."""
    code, _, err = run(
        "discover", "ibnetdiscover", ib(fixtures, "ibtopotool-2007-chassis-voltaire.out")
    )
    assert code == 2
    assert (
        "vendor default or SHARP descriptions ('MT23108 InfiniHost Mellanox Technologies'),"
        " which name no host"
    ) in one_line(err)
    assert "--host-pattern" in err


def test_ufm_ports_whose_hosts_the_pattern_misses(fixtures: Path) -> None:
    ports = fixtures / "ufm" / "volcano-mock-ufmRest-resources-ports.json"
    code, _, err = run("discover", "ufm", ports, "--host-pattern", "^gpu")
    assert code == 2 and "matched none of the 8 description(s)" in one_line(err)
    code, out, _ = run("discover", "ufm", ports, "--host-pattern", "^node[0-3]$")
    assert code == 0 and "node0" in out


def test_labels_that_no_node_carries(tmp_path: Path) -> None:
    """A typo in a wider level was silent while one in the narrowest warned; a typo in the
    narrowest one, with nothing found at all, is an error."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        dump_yaml(
            [encode_node(node(f"n{i}", {"zone": "z1", "rack": f"r{i % 2}"})) for i in range(4)]
        )
    )
    code, out, err = run("discover", "labels", nodes, "--levels", "zome,rack")
    assert code == 0 and "name: labels-z1-r0" not in out and "labels-r0" in out
    assert (
        "topology labels: no node carries the label(s) zome (levels, widest first: zome, rack)"
        in (one_line(err))
    )
    code, out, err = run(
        "discover", "labels", nodes, "--levels", "zone,rak", "--levels", "x=zome,rack"
    )
    assert code == 0
    lines = one_line(err)
    assert "topology labels1: no node carries the label(s) rak" in lines
    assert "topology x: no node carries the label(s) zome" in lines
    code, out, err = run("discover", "labels", nodes, "--levels", "zone,rak")
    assert (code, out) == (2, "")
    assert (
        "found no HyperNodes in 4 node(s): topology labels: none of the 4 node(s) it selects"
        " carries its narrowest label rak"
    ) in one_line(err)


# -- what the user is told about hosts ---------------------------------------------------------


def test_host_pattern_warning_names_the_pattern_and_what_it_missed(fixtures: Path) -> None:
    code, out, err = run(
        "discover", "ibnetdiscover", ib(fixtures, "topograph-dgx-ndr-40sw-582ca.out"),
        "--host-pattern", r"^(?P<host>a0\d-p1-dgx-\d+-c\d+)",
    )  # fmt: skip
    assert code == 0 and out
    lines = one_line(err)
    assert r"host pattern '^(?P<host>a0\d-p1-dgx-\d+-c\d+)' found no host in " in lines
    assert "such as 'B11-P1-CUFM-02 mlx5_0'" in lines and "those CAs are not used" in lines


def test_hosts_that_collapse_into_one_name_are_reported(fixtures: Path) -> None:
    """Three HCAs described 'localhost HCA-n' became one node 'localhost'; a host pattern
    that cuts away the machine number merges whole racks."""
    dump = ib(fixtures, "topograph-dgx-ndr-40sw-582ca.out")
    code, _, err = run("discover", "ibnetdiscover", dump)
    assert code == 0
    assert (
        "'localhost' (3 CAs: 'localhost HCA-1', 'localhost HCA-2', 'localhost HCA-6';"
        " a placeholder, not a machine's name)"
    ) in one_line(err)
    code, _, err = run("discover", "ibnetdiscover", dump, "--host-pattern", r"^(a08-p1-dgx-0\d)")
    assert code == 0
    assert "'a08-p1-dgx-04' (68 CAs: 'a08-p1-dgx-04-c01 mlx5_0'" in one_line(err)
    assert "descriptions that differ before the host pattern's match" in one_line(err)


# -- the mass-delete guard ---------------------------------------------------------------------


def test_reconcile_refuses_to_delete_most_of_the_fabric(fixtures: Path, tmp_path: Path) -> None:
    """9 HyperNodes exist; a host pattern that finds the hosts of one leaf alone keeps 1."""
    dump = ib(fixtures, "topograph-dgx-ndr-40sw-582ca.out")
    existing = tmp_path / "existing.yaml"
    code, out, _ = run("discover", "ibnetdiscover", dump)
    existing.write_text(out)
    narrow = ("discover", "ibnetdiscover", dump, "--host-pattern", r"^(a08-p1-dgx-0\d)")
    code, out, err = run(*narrow, "--reconcile", existing)
    assert (code, out) == (2, "")
    lines = one_line(err)
    assert (
        "the plan would delete 8 of the 9 HyperNode(s) managed by 'ibnetdiscover' (89%, more"
        " than the 50% allowed): "
    ) in lines
    assert "pass --allow-mass-delete" in lines
    code, out, _ = run(*narrow, "--reconcile", existing, "--allow-mass-delete")
    assert code == 0 and len(yaml.safe_load(out)["delete"]) == 8
    code, out, _ = run(*narrow, "--reconcile", existing, "--max-delete-share", "0.9")
    assert code == 0 and len(yaml.safe_load(out)["delete"]) == 8
    code, _, err = run(*narrow, "--reconcile", existing, "--max-delete-share", "1.5")
    assert code == 2 and "--max-delete-share takes a share between 0 and 1, not 1.5" in err
    code, _, err = run(*narrow, "--allow-mass-delete")
    assert code == 2 and "only apply with --reconcile" in err
    code, out, _ = run("discover", "ibnetdiscover", dump, "--reconcile", existing)
    assert code == 0 and yaml.safe_load(out)["writes"] == 0


def _hn(name: str, owner: str = "o") -> HyperNode:
    return hypernode(name, tier=1, nodes=[f"{name}-n"], owner=owner)


def test_guard_deletes_counts_what_the_owner_loses() -> None:
    """The function the controller calls: shares, group moves, other owners, bounds."""
    have = [_hn(f"h{i}") for i in range(4)] + [_hn("theirs", owner="other")]
    keep_two = reconcile.plan(have[:2], have, owner="o")
    assert reconcile.guard_deletes(keep_two) is None  # 2 of 4 is not more than half
    keep_one = reconcile.plan(have[:1], have, owner="o")
    refusal = reconcile.guard_deletes(keep_one)
    assert refusal is not None
    assert (refusal.names, refusal.owned) == (("h1", "h2", "h3"), 4)
    assert "delete 3 of the 4 HyperNode(s) managed by 'o' (75%" in str(refusal)
    assert refusal.to_dict()["delete"] == ["h1", "h2", "h3"]
    assert reconcile.guard_deletes(keep_one, max_share=0.75) is None
    assert reconcile.guard_deletes(reconcile.plan([], have, owner="o"), max_share=1.0) is None
    assert reconcile.guard_deletes(reconcile.plan([], have, owner="o")) is not None
    assert reconcile.guard_deletes(reconcile.plan([], have, owner="nobody")) is None
    # writing Volcano's group beside tierra's: another name space, created and nothing
    # of tierra's deleted (a HyperNode is (group, name))
    moved = reconcile.plan(have[:4], have, owner="o", group=VOLCANO_GROUP)
    assert not moved.of(reconcile.Action.DELETE)
    assert [c.name for c in moved.of(reconcile.Action.CREATE)] == ["h0", "h1", "h2", "h3"]
    assert reconcile.guard_deletes(moved, max_share=0.0) is None
    # without a group, a desired object meeting its name in the other group moves it:
    # deleted and re-created, which the guard does not count as lost
    volcano = [replace(h, group=VOLCANO_GROUP) for h in have[:4]]
    moved = reconcile.plan(volcano, have, owner="o")
    assert len(moved.of(reconcile.Action.DELETE)) == 4
    assert reconcile.guard_deletes(moved, max_share=0.0) is None
    with pytest.raises(ConfigError, match="between 0 and 1"):
        reconcile.guard_deletes(keep_two, max_share=float("nan"))
