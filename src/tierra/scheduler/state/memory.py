"""What sessions remember between runs, kept beside the cache: failures and built gangs.

A ``Memory`` belongs to one ``ClusterStore`` (it forgets everything when handed another, or
a different configuration) and is what lets a session skip work that must repeat:

* ``failures``: each waiting gang's last failure that must repeat until something
  changes (see ``session.py`` for which ones), with where it searched and for what;
* ``built``: each pending gang as ``gang.collect`` built it, reused while nothing it
  reads has changed (``ClusterStore.unchanged_since``);
* ``waiting_since``: when (the adapter's clock, ``run_session(now=)``) each waiting gang
  was first seen waiting, or last made room by eviction: the preemption delay counts
  from there.

Without one, ``run_session`` starts from nothing: same decisions, more work. An adapter
that runs many sessions keeps one ``Memory`` next to its ``ClusterStore``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.status import Status

if TYPE_CHECKING:
    from tierra.scheduler.gang import Gang
    from tierra.scheduler.state.store import ClusterStore


@dataclass(frozen=True, slots=True)
class Failure:
    """A gang's last failure that must repeat (``Status.must_repeat``), and when it was
    found (``ClusterStore.clock``); ``status.searched`` says what freed room could help."""

    status: Status
    at: int


@dataclass(slots=True)
class Memory:
    """See the module docstring. ``skip_unchanged = False`` re-tries every gang."""

    failures: dict[str, Failure] = field(default_factory=dict)
    built: dict[str, tuple[int, Gang]] = field(default_factory=dict)
    waiting_since: dict[str, float] = field(default_factory=dict)  # gang -> adapter time
    skip_unchanged: bool = True
    _cache: object = None  # the ``ClusterStore.token`` these entries were made against
    _config: SchedulerConfig | None = None
    _names: frozenset[str] = frozenset()

    def attach(self, cache: ClusterStore, config: SchedulerConfig) -> None:
        """Start a session on ``cache`` under ``config``: forget what no longer applies."""
        if self._cache is not cache.token:
            self.failures.clear()
            self.built.clear()
            self.waiting_since.clear()
            self._cache = cache.token
        if self._config != config:
            self.failures.clear()
            self._config = config
        names = frozenset(config.scheduler_names)
        if self._names != names:
            self.built.clear()
            self._names = names
