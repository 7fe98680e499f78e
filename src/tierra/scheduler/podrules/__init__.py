"""Pod rules: kube-scheduler's default filters that tie a pod to other pods, ports or
storage, one module per plugin (named as upstream names them), each a pure evaluator
returning a node mask and a structured reason. ``contract`` says which of a pod's fields
the session honours and refuses the rest with a reason naming the field."""
