"""``tierra controller``: the cluster's topology kept current, for every scheduler.

Pure parts (no client):

* ``config``: the configuration file, every problem with its field path;
* ``status_patch``: a HyperNode's status as a merge patch, or nothing when unchanged;
* ``export_changes``: node-label and exported-object changes, owned labels per Node;
* ``writes``: a reconcile plan's changes as request bodies.

Against the API server (``tierra.kube``'s client, informers, leader election, serving):

* ``cache``: ``ControllerCache``, what the informers delivered and which work each
  change concerns;
* ``inputs``: file and ConfigMap inputs kept current; ``sources``: each source, live;
* ``reconciler``: plan, guard, write, retry; ``status_writer``: the status pass;
  ``export_writer``: the export pass; ``metrics``: the Prometheus metrics;
* ``runner``: the loops for one configuration, and the configuration watched;
* ``app``: the process (probes, metrics, Events, the Lease).
"""
