"""Where ``tierra serve FILE`` spends its time, stage by stage, in one process.

The stages are what the server does before it prints its URL (read the snapshot, fill
the store, build the view the first page reads) and what the first gang table waits for
(the scheduler's cache, one dry-run session, the gang rows). Each is timed in wall and
CPU seconds. Only APIs every version of the dashboard has are required, so the same
script measures an older checkout (``PYTHONPATH=old/src python bench/web_stages.py
FILE``) for a before/after table; stages a version does not have are left out.

``cache`` is ``ClusterStore.from_snapshot`` (what ``tierra schedule`` and the old dashboard's
every dry run paid); ``dry run`` is one session on it inside ``ClusterStore.trial()`` where the
cache has one (else a plain session: the old dashboard threw the cache away after it).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def _building() -> contextlib.AbstractContextManager[None]:
    """What ``tierra serve`` wraps its start-up in, in versions that do: the cyclic
    collector paused, then what was built frozen out of its way."""
    try:
        from tierra.bulk import building  # noqa: PLC0415 - newer versions only
    except ImportError:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def serve_like() -> Iterator[None]:
        with building():
            yield
        gc.freeze()

    return serve_like()


def measure(path: Path) -> dict[str, dict[str, float]]:
    """Each stage's ``wall_s`` and ``cpu_s`` for the snapshot file at ``path``."""
    from tierra.api.snapshot import load_snapshot  # noqa: PLC0415
    from tierra.scheduler import ClusterStore, SchedulerConfig, run_session  # noqa: PLC0415
    from tierra.web.gangs import Gangs  # noqa: PLC0415
    from tierra.web.store import Store  # noqa: PLC0415
    from tierra.web.view import TopologyView  # noqa: PLC0415

    out: dict[str, dict[str, float]] = {}

    def timed(name: str, fn: Callable[[], T]) -> T:
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        out[name] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        return result

    config = SchedulerConfig()
    with _building():
        snapshot = timed("read", lambda: load_snapshot([path]))
        store = timed("store", lambda: Store(snapshot))
        view = timed("view", lambda: TopologyView(store))
        cache = timed("cache", lambda: ClusterStore.from_snapshot(store.snapshot()))

    def dry_run() -> Any:
        trial = getattr(cache, "trial", None)
        with trial() if trial is not None else _nothing():
            return run_session(cache, config)

    result = timed("dry run", dry_run)
    analysis = _analysis(result, cache)
    timed("gang rows", lambda: Gangs(store, view, config, analysis).rows())
    return out


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


def _analysis(result: Any, cache: Any) -> Any:
    from tierra.web.gangs import Analysis  # noqa: PLC0415

    of = getattr(Analysis, "of", None)
    if of is not None:
        return of(result, cache.pods)
    return Analysis(
        waiting={u.podgroup: u.reason for u in result.unschedulable},
        placeable={},
        evictions=len(result.evictions),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("snapshot", type=Path)
    args = parser.parse_args()
    print(json.dumps(measure(args.snapshot), indent=2))


if __name__ == "__main__":
    main()
