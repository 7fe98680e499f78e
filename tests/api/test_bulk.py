"""``tierra.bulk.building``: the cyclic collector paused while a snapshot is built."""

from __future__ import annotations

import gc

import pytest

from tierra.bulk import building


def test_building_pauses_the_collector_and_the_outermost_block_resumes_it() -> None:
    assert gc.isenabled()
    with building():
        assert not gc.isenabled()
        with building():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it paused: leaves it so
    assert gc.isenabled()


def test_building_resumes_the_collector_when_the_block_raises() -> None:
    with pytest.raises(ValueError, match="boom"), building():
        raise ValueError("boom")
    assert gc.isenabled()
