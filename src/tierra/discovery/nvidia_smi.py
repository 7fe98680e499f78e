"""``nvidia-smi topo -m`` -> the node's GPU, NIC and NUMA domains (``NodeTopology``).

The matrix has a header row naming the devices (``GPU0`` ..., ``NIC0`` ... or, on older
drivers, ``mlx5_0`` ...) followed by ``CPU Affinity``, ``NUMA Affinity`` and ``GPU NUMA
ID`` columns when the driver prints them; one row per device with a link code per
device column (``X`` on the diagonal) and, for GPUs, the affinity values. Headers are
tab-separated, or (re-aligned copies) separated by two or more spaces. A ``NIC Legend``
maps ``NIC0`` to its device name. ``SOC`` (older drivers' name for ``SYS``) is read as
``SYS``.

Errors (a row with the wrong number of cells, an unknown code, a matrix that is not
symmetric, a device row missing) name the file and line; the node gets nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tierra.api.files import read_text
from tierra.api.meta import dns_subdomain_problem
from tierra.discovery import naming
from tierra.discovery.nodetopology import PCIE_DISTANCE, Device, NodeTopology, group_domains
from tierra.discovery.result import Discovery, ParseError
from tierra.errors import InputError

SOURCE = "nvidia-smi"
_EXTRA = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_CODE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|PSB)$")
_GPU = re.compile(r"^GPU(\d+)$")
_NIC = re.compile(r"^NIC(\d+)$")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _is_header(line: str) -> bool:
    """The header names GPU0 and, unlike GPU0's own row, no link code follows it."""
    cells = line.split()
    if "GPU0" not in cells:
        return False
    after = cells[cells.index("GPU0") + 1 : cells.index("GPU0") + 2]
    return not (after and _CODE.match(after[0]))


def _split_header(line: str) -> list[str]:
    if "\t" in line:
        cells = [c.strip() for c in line.split("\t")]
    else:
        cells = [c.strip() for c in re.split(r"\s{2,}", line)]
    return [c for c in cells if c]


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse(text: str, node: str, file: str = "<input>") -> NodeTopology:
    lines = text.splitlines()
    header_no = next((i for i, ln in enumerate(lines) if _is_header(ln)), None)
    if header_no is None:
        raise ParseError(file, None, "no header row naming GPU0: not 'nvidia-smi topo -m' output")
    header = _split_header(lines[header_no])
    extras = [c for c in header if c in _EXTRA]
    devices = [c for c in header if c not in _EXTRA]
    if header[: len(devices)] != devices:
        raise ParseError(
            file, header_no + 1, "device columns must come before the affinity columns"
        )
    legend: dict[str, str] = {}
    for ln in lines:
        m = _LEGEND.match(ln)
        if m:
            legend[m.group(1)] = m.group(2)
    rows = _rows(lines, header_no, devices, file)
    links = _links(devices, rows, file)
    out_devices = _devices(devices, rows, extras, legend)
    numa = _numa(out_devices, links)
    link_tuples = tuple((a, b, code) for (a, b), code in links.items())
    return NodeTopology(
        node=node,
        source=SOURCE,
        devices=tuple(out_devices),
        links=link_tuples,
        domains=tuple(group_domains(devices, links, numa or None)),
    )


_Rows = dict[str, tuple[int, list[str], list[str]]]  # device -> (line, link codes, affinity)


def _rows(lines: Sequence[str], header_no: int, devices: Sequence[str], file: str) -> _Rows:
    """The matrix rows after the header, each checked against the header's devices."""
    rows: dict[str, tuple[int, list[str], list[str]]] = {}
    for i in range(header_no + 1, len(lines)):
        raw = lines[i]
        if not raw.strip():
            break  # the legend follows a blank line
        cells = raw.split()
        name = cells[0]
        if name not in devices:
            raise ParseError(file, i + 1, f"row {name!r} is not one of the header's devices")
        codes = cells[1 : 1 + len(devices)]
        rest = cells[1 + len(devices) :]
        if len(codes) != len(devices):
            raise ParseError(
                file, i + 1, f"row {name} has {len(codes)} link cells, expected {len(devices)}"
            )
        for c in codes:
            if not _CODE.match(c):
                raise ParseError(file, i + 1, f"row {name}: unknown link code {c!r}")
        rows[name] = (i + 1, codes, rest)
    missing = [d for d in devices if d not in rows]
    if missing:
        raise ParseError(
            file, header_no + 1 + len(rows) + 1, f"no row for {', '.join(missing)} (cut short?)"
        )
    return rows


def _links(devices: Sequence[str], rows: _Rows, file: str) -> dict[tuple[str, str], str]:
    """The link code of every device pair (upper triangle); the matrix must be symmetric."""
    links: dict[tuple[str, str], str] = {}
    for a_i, a in enumerate(devices):
        line_no, codes, _ = rows[a]
        if codes[a_i] != "X":
            raise ParseError(
                file, line_no, f"row {a}: expected X on the diagonal, got {codes[a_i]}"
            )
        for b_i in range(a_i + 1, len(devices)):
            b = devices[b_i]
            code = _normal(codes[b_i])
            back = _normal(rows[b][1][a_i])
            if code != back:
                raise ParseError(
                    file,
                    rows[b][0],
                    f"{a}->{b} is {code} but {b}->{a} is {back}: the matrix is not symmetric",
                )
            links[(a, b)] = code
    return links


def _devices(
    devices: Sequence[str], rows: _Rows, extras: list[str], legend: Mapping[str, str]
) -> list[Device]:
    out_devices: list[Device] = []
    for name in devices:
        _, _, rest = rows[name]
        values = dict(zip(extras, _affinity_cells(rest, extras), strict=False))
        gpu = _GPU.match(name)
        nic = _NIC.match(name)
        if gpu:
            out_devices.append(
                Device(
                    name=name,
                    kind="gpu",
                    index=int(gpu.group(1)),
                    numa=_int_or_none(values.get("NUMA Affinity", "")),
                    cpus=values.get("CPU Affinity") or None,
                )
            )
        else:
            out_devices.append(
                Device(
                    name=name,
                    kind="nic",
                    index=int(nic.group(1)) if nic else None,
                    alias=legend.get(name) if nic else name,
                )
            )
    return out_devices


def _numa(
    out_devices: Sequence[Device], links: Mapping[tuple[str, str], str]
) -> dict[int, list[str]]:
    """Devices per NUMA node: GPUs by their affinity, NICs by the GPUs near them."""
    numa: dict[int, list[str]] = {}
    for d in out_devices:
        if d.numa is not None:
            numa.setdefault(d.numa, []).append(d.name)
    for d in out_devices:
        if d.kind != "gpu":
            # A NIC belongs to the NUMA node of the GPUs it reaches without crossing sockets.
            near = {
                g.numa
                for g in out_devices
                if g.numa is not None
                and PCIE_DISTANCE.get(
                    links.get((d.name, g.name)) or links.get((g.name, d.name)) or "", 99
                )
                <= PCIE_DISTANCE["NODE"]
            }
            if len(near) == 1:
                numa[near.pop()].append(d.name)
    return numa


def _affinity_cells(rest: list[str], extras: list[str]) -> list[str]:
    """Affinity cells are single tokens (``0-23``, ``0``, ``N/A``); a NIC row has none."""
    return [("" if c == "N/A" else c) for c in rest[: len(extras)]]


def _normal(code: str) -> str:
    return {"SOC": "SYS", "PSB": "PIX"}.get(code, code)


def node_name_for(path: str | Path) -> str:
    """The node a file describes by default: its name without extension (``gpu001.txt``)."""
    return naming.clean(Path(path).name.split(".")[0])


def discover_nvidia_smi(paths: Iterable[str | Path], *, node: str | None = None) -> Discovery:
    files = list(paths)
    if node is not None and len(files) != 1:
        raise InputError("--node names the node of a single file; give one file")
    if node is not None and (why := dns_subdomain_problem(node)):
        raise InputError(f"--node: {why}")  # the Node patch would be rejected by the API
    topologies = []
    for path in files:
        text = read_text(path, expected="nvidia-smi topo -m output")
        topologies.append(parse(text, node or node_name_for(path), str(path)))
    names = [t.node for t in topologies]
    if len(set(names)) != len(names):
        raise InputError("two files describe the same node; use distinct file names")
    return Discovery(
        source=SOURCE,
        owner=SOURCE,
        node_topologies=tuple(topologies),
        summary={"nodes": len(topologies), "gpus": sum(len(t.gpus) for t in topologies)},
    )
