"""tierra: infrastructure topology as a first-class API, and a topology-aware gang scheduler.

The packages are layered bottom to top: ``api`` (objects, snapshot files) ->
``topology`` (the index over a snapshot) -> ``scheduler`` / ``discovery`` -> ``sim`` ->
the edges (``kube``, ``web``, ``cli``). The core never imports an edge; import-linter
enforces it in ``make test``.
"""

__version__ = "0.1.0"
