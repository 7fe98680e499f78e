"""``tierra webhook``: a validating admission webhook for HyperNodes and PodGroups.

* ``admission``: the decisions (pure): a ``Judge`` fed by informers admits or refuses an
  object against what already exists, with ``tierra validate``'s words;
* ``review``: AdmissionReview ``admission.k8s.io/v1`` in and out;
* ``certs``: the webhook's own CA and serving certificate, and when to renew them (pure);
* ``server``: the HTTPS endpoint, with its certificate replaced in place on rotation;
* ``tls``: the certificate kept current in the Secret, the server and the caBundle (or
  read from cert-manager's Secret);
* ``app``: the process (informers, probes, metrics).
"""
