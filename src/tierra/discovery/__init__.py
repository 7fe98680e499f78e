"""Auto-discovery: what a cluster already knows, turned into HyperNodes.

One module per source, each a pure function from its input to a ``Discovery`` (the
desired HyperNodes, per-node topologies, link issues, notes):

* ``labels`` (+ ``presets``): node labels, by ordered keys or cloud/Kueue/KAI presets;
* ``ibnetdiscover`` and ``ufm`` (+ ``ufm_client``): InfiniBand fabrics, both through
  ``fabric``, which tiers switches and finds degraded links;
* ``slurm``: ``topology.conf`` / ``topology.yaml``, read and written (``hostlist``);
* ``nvidia_smi`` and ``dra``: inside the node (``nodetopology``), DRA cliques too.

Around them: ``naming`` (deterministic names), ``reconcile`` (desired vs existing,
ownership), ``health`` (status conditions), ``export_formats`` (Kueue, KAI, labels, Slurm)
and ``registry`` (every source, listed by hand). Nothing here talks to Kubernetes.
"""

from tierra.discovery.result import (
    MANAGED_BY,
    Discovery,
    LinkIssue,
    LinkState,
    ParseError,
)

__all__ = ["MANAGED_BY", "Discovery", "LinkIssue", "LinkState", "ParseError"]
