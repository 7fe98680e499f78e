"""ibnetdiscover dumps -> tiered HyperNodes, on real fabrics; bad input fails with a line.

Expected structures were counted by hand in the dumps with grep/awk (commands in each
test's docstring), not taken from the code under test.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from disc_helpers import by_name, children_of, nodes_of

from tierra.discovery import LinkState, ParseError
from tierra.discovery.fabric import HostNamer
from tierra.discovery.ibnetdiscover import discover_ibnetdiscover, parse, read_text
from tierra.discovery.result import MANAGED_BY
from tierra.errors import InputError


def ib(fixtures: Path, name: str) -> Path:
    return fixtures / "ibnetdiscover" / name


def test_selene_compute_fabric_three_tiers(selene_dump: Path) -> None:
    """NVIDIA Selene (DGX A100 SuperPOD), 2021.

    Counted by hand:
    * ``grep -c '^Switch'`` = 666 switches; ``grep -c '^Ca'`` = 4341 CAs, of which 666
      are SHARP "Aggregation Node"s (one inside each switch);
    * hosts: first word of the other CA descriptions, ``sort -u`` = 469 (458 ``luna-*``
      DGX nodes with 8 HCAs each = 3664 CAs, and 11 ``selene-*`` service hosts);
    * leaves (switch blocks with a port to a non-aggregation CA) = 203: 200 ``LG*`` and 3
      ``MLG*`` (MLG01-01, -02, -04);
    * rail-optimised: every DGX reaches the 8 leaves ``LGxx-01..08`` of its scalable
      unit, so those 8 merge: 25 SUs (``LG01..18`` and ``LG22..28``) + 3 MLG leaves =
      28 tier-1 domains; SU 1 (``;LG01-0``) holds 20 hosts;
    * spine groups (which ``LGxx`` each ``CSPINEg-*`` switch links to): CSPINE1 -> LG01-07,
      CSPINE2 -> LG08-14, CSPINE3 -> LG15-18, CSPINE4 -> LG22-28: 4 tier-2 domains;
      MLG01-01/02 also reach CSPINE1 (4 links), MLG01-04 only the management spines;
    * the CCORE switches join everything: one tier-3 domain;
    * port lines / 2 = 12852 links; every link is 4xHDR (50 Gb/s per lane data rate).
    """
    d = discover_ibnetdiscover([selene_dump])
    s = d.summary
    assert (s["switches"], s["cas"], s["hosts"], s["leaves"], s["links"]) == (
        666,
        4341,
        469,
        203,
        12852,
    )
    assert Counter(h.tier for h in d.hypernodes) == {1: 28, 2: 4, 3: 1}
    hns = by_name(d.hypernodes)
    su1 = hns["ib-t1-lg01-01"]
    assert len(nodes_of(su1)) == 20 and all(n.startswith("luna-") for n in nodes_of(su1))
    assert su1.meta.annotations["topology.tierra.dev/source-detail"] == (
        "switches: " + ",".join(f"lg01-0{i}" for i in range(1, 9))
    )
    pods = {h.name: sorted(children_of(h)) for h in d.hypernodes if h.tier == 2}
    assert pods["ib-t2-cspine1-01"] == sorted(
        [f"ib-t1-lg0{i}-01" for i in range(1, 8)] + ["ib-t1-mlg01-01", "ib-t1-mlg01-02"]
    )
    assert pods["ib-t2-cspine2-01"] == [f"ib-t1-lg{i:02d}-01" for i in range(8, 15)]
    assert pods["ib-t2-cspine3-01"] == [f"ib-t1-lg{i:02d}-01" for i in range(15, 19)]
    assert pods["ib-t2-cspine4-01"] == [f"ib-t1-lg{i:02d}-01" for i in range(22, 29)]
    top = hns["ib-t3-ccore1-001"]
    assert sorted(children_of(top)) == sorted([*pods, "ib-t1-mlg01-04"])
    # HDR: 4 lanes x 50 Gb/s = 200 Gb/s = 25 GB/s per host port. SU 1's leaves have 160
    # host ports and 159 uplinks to CSPINE switches (awk over the ";LG01-0" blocks: one
    # cable is missing), so 160:159 rounds to 1.01.
    assert su1.link is not None and su1.link.bandwidth_gbps == 25.0
    assert su1.link.oversubscription == 1.01 and su1.link.medium == "infiniband"
    assert all(h.meta.labels[MANAGED_BY] == "ibnetdiscover" for h in d.hypernodes)
    assert d.link_issues == ()
    # every host is in exactly one tier-1 domain
    members = [n for h in d.hypernodes if h.tier == 1 for n in nodes_of(h)]
    assert len(members) == len(set(members)) == 469


def test_topograph_ndr_dgx_dump(fixtures: Path) -> None:
    """Topograph's DGX H100 (NDR) dump.

    ``grep -c '^Switch'`` = 40: 31 ``IBLEAF`` (A09: 4+4+3+4, B09: 4x4) and 9 ``IBSPINE``
    (A10: 4, B10: 5). 582 CAs = 40 aggregation nodes + 69 HCAs still named
    "MT4129 ConnectX7 ... Mellanox Technologies" (no host) + 473 named HCAs on 122 hosts.
    Each host's HCAs reach ``IBLEAF-0r-SS`` for rails r = 1..4 of its scalable unit SS, so
    the leaves group by SU: A09 SUs 01-04 and B09 SUs 05-08 = 8 tier-1 domains, the
    spines join all 8 in one tier-2 domain. NDR: 4 x 100 Gb/s = 50 GB/s per port.
    """
    d = discover_ibnetdiscover([ib(fixtures, "topograph-dgx-ndr-40sw-582ca.out")])
    assert (d.summary["switches"], d.summary["leaves"], d.summary["cas"]) == (40, 31, 582)
    assert d.summary["hosts"] == 122
    assert Counter(h.tier for h in d.hypernodes) == {1: 8, 2: 1}
    tier1 = {h.name: nodes_of(h) for h in d.hypernodes if h.tier == 1}
    assert sorted(tier1) == sorted(
        [f"ib-t1-a09-p1-ibleaf-01-0{su}" for su in (1, 2, 3, 4)]
        + [f"ib-t1-b09-p1-ibleaf-01-0{su}" for su in (5, 6, 7, 8)]
    )
    # hosts per SU, counted with awk over (host, leaf) pairs: 11, 11, 18, 17 | 18, 15, 16, 16
    sizes = {name[-2:]: len(v) for name, v in tier1.items()}
    assert sizes == {"01": 11, "02": 11, "03": 18, "04": 17, "05": 18, "06": 15, "07": 16, "08": 16}
    assert sum(sizes.values()) == 122
    top = next(h for h in d.hypernodes if h.tier == 2)
    assert len(children_of(top)) == 8
    assert any("MT4129" in str(n) for n in d.notes)
    leaf = by_name(d.hypernodes)["ib-t1-a09-p1-ibleaf-01-03"]
    assert leaf.link is not None and leaf.link.bandwidth_gbps == 50.0


def test_two_tier_university_fabric(fixtures: Path) -> None:
    """loginoff 2014: 8 SX6036 switches; ``ib1``..``ib7`` carry the 144 single-port hosts,
    ``ib8`` only switch links (hand count of Switch blocks with "H-" ports: 7). Hosts on
    one leaf share nothing with other leaves: 7 tier-1 domains, one tier-2 above."""
    d = discover_ibnetdiscover([ib(fixtures, "loginoff-2014-qdr-fdr10-2tier.out")])
    assert (d.summary["switches"], d.summary["leaves"], d.summary["hosts"]) == (8, 7, 144)
    assert Counter(h.tier for h in d.hypernodes) == {1: 7, 2: 1}
    assert sum(len(nodes_of(h)) for h in d.hypernodes if h.tier == 1) == 144


def test_degraded_links_are_reported(fixtures: Path, tmp_path: Path) -> None:
    """2007 Voltaire dump: port 10 of the ISR9024 reaches port 1 of the SW-6IB4 at 1xSDR
    (the SW-6IB4 block says so at line 26; every other link is 4x), and one HCA port runs
    1xSDR too (line 52). The two ends of the ISL disagree (4x from one side): the lower
    reading wins. The lab dump's loop cable on r-ufm-sw226 ports 25-26 runs FDR10 while
    the other switch links of that switch model run FDR.

    The dump's four HCAs all carry the vendor's default description, so as captured it
    names no host (an error); here each CA block is given a host, lines kept in place."""
    original = ib(fixtures, "ibtopotool-2007-chassis-voltaire.out")
    with pytest.raises(InputError, match="vendor default or SHARP descriptions"):
        discover_ibnetdiscover([original])
    lines = original.read_text().splitlines(keepends=True)
    for no, line in enumerate(lines):
        if line.startswith("Ca"):
            lines[no] = line.replace("MT23108 InfiniHost Mellanox Technologies", f"host{no} HCA")
    named = tmp_path / "voltaire-named.out"
    named.write_text("".join(lines))
    d = discover_ibnetdiscover([named])
    issues = sorted(d.link_issues, key=lambda i: i.where)
    assert [(i.state, i.where) for i in issues] == [
        (LinkState.DEGRADED, "line 26"),
        (LinkState.DEGRADED, "line 52"),
    ]
    assert "1xSDR" in issues[0].detail and "4xSDR" in issues[0].detail
    lab = discover_ibnetdiscover([ib(fixtures, "ufm-lab-mixed-fdr-edr-hdr-small.out")])
    assert [i.detail for i in lab.link_issues] == ["4xFDR10 where links like it run at 4xFDR"]


def test_storage_fabric_flags_edr_links_of_hdr_adapters(fixtures: Path) -> None:
    """Selene storage: all 1247 CAs are ConnectX-6 (``devid=0x101b``), but the 320 ports of
    the ``ai400x-*`` storage appliances run at 4xEDR (``grep '^Ca.*ai400x' -A1 | grep -c
    EDR`` = 320) where every other CX-6 link runs HDR: 320 degraded links, all on
    ``SLG*`` leaves."""
    d = discover_ibnetdiscover([ib(fixtures, "selene-storage-edr-hdr.out")])
    assert d.summary["degradedLinks"] == 320
    assert all(
        "ai400x" in i.b and i.hosts and i.hosts[0].startswith("ai400x") for i in d.link_issues
    )
    assert all(i.hypernode and i.hypernode.startswith("ib-t1-slg") for i in d.link_issues)


def test_small_dialects(fixtures: Path) -> None:
    """ibsim's minimal dialect (no GUIDs, ``Hca``, no descriptions: the node id names the
    host): Switch1 holds Hca1 and Hca2, Switch2 only ISLs. The ``-p`` ports form: two
    switches with hosts, in two separate fabrics (no ISL between them)."""
    d = discover_ibnetdiscover([ib(fixtures, "ibsim-net-2sw-2hca-minimal.out")])
    assert [(h.name, nodes_of(h)) for h in d.hypernodes] == [("ib-t1-switch1", ["hca1", "hca2"])]
    p = discover_ibnetdiscover([ib(fixtures, "ports-p-edr-treydock.out")])
    assert sorted((h.name, tuple(nodes_of(h))) for h in p.hypernodes) == [
        ("ib-t1-ib-i1l1s01", ("o0001", "o0002")),
        ("ib-t1-ib-i4l1s01", ("p0001",)),
    ]
    assert p.summary["unconnectedPorts"] == 2
    odd = discover_ibnetdiscover([ib(fixtures, "ports-p-hdr-sharp-odd-names.out")])
    assert [(h.name, nodes_of(h)) for h in odd.hypernodes] == [
        ("ib-t1-5fb0405-leaf-ib01", ["worker20"])
    ]


def test_log_noise_around_the_dump_is_skipped(fixtures: Path) -> None:
    """A PuTTY log: a header line before the dump, a shell prompt after it (line 33823),
    tabs stripped (``Switch41 "S-..."#``). Both are noted; the dump itself is read."""
    d = discover_ibnetdiscover([ib(fixtures, "ufm-ndt-putty-log-tabs-stripped.out.gz")])
    notes = " ".join(str(n) for n in d.notes)
    assert "before the dump (line 1)" in notes and "after the dump (line 33823)" in notes
    assert d.summary["switches"] == 400 and d.hypernodes
    umad = discover_ibnetdiscover([ib(fixtures, "ibtopotool-2016-edr-with-umad-error.out")])
    assert len(umad.hypernodes) == 2


def test_undescribed_devices_mean_a_cut_dump(fixtures: Path) -> None:
    """superbench's "Faked topology file" links port 41 of its first switch (line 10) to an
    aggregation node it never describes: read as a cut-short dump unless allowed."""
    path = ib(fixtures, "superbench-azure-hdr-director-full.out")
    with pytest.raises(ParseError) as err:
        discover_ibnetdiscover([path])
    assert err.value.line == 10 and "never describes" in str(err.value)
    assert discover_ibnetdiscover([path], allow_partial=True).summary["switches"] > 0


def test_truncated_and_garbled_dumps_fail_with_the_line(selene_dump: Path, tmp_path: Path) -> None:
    lines = selene_dump.read_text().splitlines(keepends=True)
    # 1. cut in the middle of a port line
    cut_at = next(i for i, ln in enumerate(lines) if i > 5000 and ln.startswith("["))
    mid = tmp_path / "mid.out"
    mid.write_text("".join(lines[:cut_at]) + lines[cut_at][:12])
    with pytest.raises(ParseError) as err:
        discover_ibnetdiscover([mid])
    assert err.value.line == cut_at + 1 and str(mid) in str(err.value)
    # 2. cut at a line boundary: later blocks are missing, earlier ports name them
    whole = tmp_path / "half.out"
    whole.write_text("".join(lines[: len(lines) // 2]))
    with pytest.raises(ParseError) as err:
        discover_ibnetdiscover([whole])
    assert err.value.line is not None and "never describes" in str(err.value)
    ref_line = lines[err.value.line - 1]
    assert ref_line.startswith("[")  # the first port naming a missing device
    # 3. a garbled line in the middle
    garbled = tmp_path / "garbled.out"
    bad = [*lines[:200], "Switch 41 S-no-quotes # oops\n", *lines[200:]]
    garbled.write_text("".join(bad))
    with pytest.raises(ParseError) as err:
        discover_ibnetdiscover([garbled])
    assert err.value.line == 201


def test_not_a_dump(tmp_path: Path) -> None:
    empty = tmp_path / "empty.out"
    empty.write_text("# nothing here\n")
    with pytest.raises(ParseError, match="not ibnetdiscover output"):
        discover_ibnetdiscover([empty])
    binary = tmp_path / "bin.out"
    binary.write_bytes(b"\x00\x01\x02")
    with pytest.raises(InputError, match="binary"):
        read_text(binary)


def test_host_pattern(fixtures: Path) -> None:
    """A pattern with a ``host`` group maps descriptions to node names."""
    namer = HostNamer(r"^(?P<host>luna-\d+)")
    assert namer("luna-0001 mlx5_0") == "luna-0001"
    assert namer("selene-login-01 HCA-2") is None
    assert HostNamer()("Mellanox Technologies Aggregation Node") is None
    assert HostNamer()("MT4129 ConnectX7   Mellanox Technologies") is None
    assert HostNamer()("SAT111092710053 ibp11s0f0") == "sat111092710053"
    d = discover_ibnetdiscover(
        [ib(fixtures, "ibtopotool-2016-edr-with-umad-error.out")],
        host_pattern=r"^(r-ufm1\d\d)",
    )
    assert sorted(n for h in d.hypernodes for n in nodes_of(h)) == [
        "r-ufm100",
        "r-ufm101",
        "r-ufm111",
    ]


def test_same_input_same_output(fixtures: Path) -> None:
    path = ib(fixtures, "topograph-dgx-ndr-40sw-582ca.out")
    text = read_text(path)
    a, _ = parse(text, "x")
    b, _ = parse(text, "x")
    assert len(a.links) == len(b.links)
    assert discover_ibnetdiscover([path]) == discover_ibnetdiscover([path])
