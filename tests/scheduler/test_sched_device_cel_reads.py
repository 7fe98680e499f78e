"""Devices that read alike share one verdict: what a selector reads of ``device`` (from
cel-cpp's checked expression) and the reading of a device give the same answer as
evaluating the selector on each device, errors included."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.api.resource import Attribute, Device
from tierra.scheduler.devices.cel import CelError, compile_selector, device_input, reading

GPU = "gpu.nvidia.com"

EXPRESSIONS = (
    f"device.driver == '{GPU}' && device.attributes['{GPU}'].type == 'gpu'",
    f"device.attributes['{GPU}']['type'] == 'gpu'",
    f"has(device.attributes['{GPU}'].type)",
    f"device.attributes['{GPU}'].index > 2",
    f"device.attributes['{GPU}'].tags.exists(t, t == 'a')",
    f"device.capacity['{GPU}'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['dra.net'].kind == 'rdma' || device.driver == 'dra.net'",
    f"'type' in device.attributes['{GPU}']",  # reads the whole domain: per device
    f"cel.bind(a, device.attributes['{GPU}'], a.type == 'gpu')",  # likewise
    f"size(device.attributes['{GPU}']) > 1",  # likewise
    "device.allowMultipleAllocations == false",
    "device.nope == 1",  # no such field: an error on every device
)

READS = {
    EXPRESSIONS[0]: {("driver",), ("attributes", GPU, "type")},
    EXPRESSIONS[2]: {("attributes", GPU, "type")},
    EXPRESSIONS[5]: {("capacity", GPU, "memory")},
    EXPRESSIONS[7]: None,
    EXPRESSIONS[8]: None,
    EXPRESSIONS[9]: None,
}


def test_what_a_selector_reads() -> None:
    for expression, expected in READS.items():
        got = compile_selector(expression).reads
        assert (None if got is None else set(got)) == expected, expression


_names = st.sampled_from(["type", f"{GPU}/type", "index", f"{GPU}/index", "tags", "dra.net/kind"])
_values = st.one_of(
    st.sampled_from([Attribute("string", "gpu"), Attribute("string", "mig")]),
    st.integers(0, 5).map(lambda i: Attribute("int", i)),
    st.sampled_from([Attribute("strings", ("a", "b")), Attribute("strings", ())]),
)
_devices = st.builds(
    lambda attrs, memory, driver: (
        driver,
        Device(
            name="d",
            attributes=attrs,
            capacity={} if memory is None else {"memory": Fraction(memory * 2**30)},
        ),
    ),
    st.dictionaries(_names, _values, max_size=4),
    st.one_of(st.none(), st.sampled_from([24, 40, 80])),
    st.sampled_from([GPU, "dra.net"]),
)


def _verdict(expression: str, driver: str, device: Device) -> bool | str:
    try:
        return compile_selector(expression).matches(device_input(driver, device))
    except CelError:
        return "error"


@settings(max_examples=150, deadline=None)
@given(st.lists(_devices, min_size=2, max_size=6), st.sampled_from(EXPRESSIONS))
def test_equal_readings_mean_equal_verdicts(devices: list, expression: str) -> None:
    reads = compile_selector(expression).reads
    if reads is None:
        return
    paths = tuple(sorted(reads))
    seen: dict[tuple[object, ...], bool | str] = {}
    for driver, device in devices:
        key = reading(driver, device, paths)
        verdict = _verdict(expression, driver, device)
        if key is None:
            continue  # a name given both bare and qualified: evaluated per device
        assert seen.setdefault(key, verdict) == verdict, (expression, key)
