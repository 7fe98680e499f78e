"""``python -m tierra.kube.testing up``: a control plane in the foreground until Ctrl-C."""

import sys

from tierra.kube.testing.controlplane import main

sys.exit(main())
