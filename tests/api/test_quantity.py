from fractions import Fraction

import pytest

from tierra.api.quantity import QuantityError, milli_to_quantity, parse_quantity, to_milli


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("500m", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("2", Fraction(2)),
        ("0.1", Fraction(1, 10)),
        ("1.5Ki", Fraction(1536)),
        ("3M", Fraction(3_000_000)),
        ("100n", Fraction(1, 10**7)),
        ("+4", Fraction(4)),
        (".5", Fraction(1, 2)),
        (8, Fraction(8)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_exact(text: str | int | float, want: Fraction) -> None:
    assert parse_quantity(text) == want


def test_ten_tenths_make_exactly_one() -> None:
    assert sum(parse_quantity("0.1") for _ in range(10)) == 1


@pytest.mark.parametrize("text", ["", "abc", "1Gb", "1.2.3", "Gi", "1 Gi", "--1", True])
def test_rejects_non_quantities(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)  # type: ignore[arg-type]


def test_milli_rounds_up_and_prints_back() -> None:
    assert to_milli("1n") == 1
    assert to_milli("250m") == 250
    assert to_milli("16Gi") == 16 * 2**30 * 1000
    assert milli_to_quantity(1500) == "1500m"
    assert milli_to_quantity(to_milli("8")) == "8"


def test_amounts_too_large_to_sum_are_problems_not_overflows() -> None:
    from tierra.api.fields import Fields, Report
    from tierra.errors import Problem

    sink: list[Problem] = []
    f = Fields(
        {"r": {"cpu": "1e25", "memory": "64Ti", "nvidia.com/gpu": "8"}},
        "",
        Report(None, "Node/n", sink),
    )
    got = f.resources("r")
    assert got == {
        "memory": to_milli("64Ti"),
        "nvidia.com/gpu": 8000,
    }  # 64 Ti = 2^46 bytes: the limit
    assert [p.path for p in sink] == ["r.cpu"]
    assert "larger than tierra can count" in sink[0].message
