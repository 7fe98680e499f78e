"""CEL selectors in Kubernetes' DRA environment, on a real H100 device's attributes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierra.api.snapshot import load_snapshot
from tierra.scheduler.devices.cel import CelError, compile_problem, compile_selector, device_input

FIXTURE = (
    Path(__file__).parent.parent / "fixtures" / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"
)


@pytest.fixture(scope="module")
def h100() -> dict[str, object]:
    snap = load_snapshot([FIXTURE])
    gpus = next(s for s in snap.resource_slices if s.driver == "gpu.nvidia.com")
    return device_input(gpus.driver, gpus.devices[0])


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # the gpu.nvidia.com DeviceClass of NVIDIA's chart (deviceclass-gpu.yaml)
        (
            "device.driver == 'gpu.nvidia.com'"
            " && device.attributes['gpu.nvidia.com'].type == 'gpu'",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].type == 'mig'", False),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("100Gi"))', False),
        ('device.capacity["gpu.nvidia.com"].memory == quantity("81559Mi")', True),
        (
            'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.9.0"))',
            True,
        ),
        ('device.attributes["gpu.nvidia.com"].cudaComputeCapability.major() == 9', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:55"', True),
        ('has(device.attributes["dra.example.com"].model)', False),  # unknown domain: empty map
        (
            "cel.bind(g, device.attributes['gpu.nvidia.com'],"
            " g.productName.lowerAscii().contains('h100'))",
            True,
        ),
    ],
)
def test_the_dra_environment(h100: dict[str, object], expression: str, expected: bool) -> None:
    assert compile_selector(expression).matches(h100) is expected


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.nvidia.com"].noSuchAttribute == 1',  # unknown field: an error
        "1 + 1",  # not a bool
        'quantity("1").compareTo(semver("1.0.0")) == 0',
    ],
)
def test_runtime_failures_are_errors_not_false(h100: dict[str, object], expression: str) -> None:
    with pytest.raises(CelError):
        compile_selector(expression).matches(h100)


def test_a_broken_expression_says_why_and_compiles_once() -> None:
    assert "Syntax error" in (compile_problem("device.driver ==") or "")
    assert compile_selector("device.driver == 'x'") is compile_selector("device.driver == 'x'")
