"""What machine a benchmark ran on: every result file records it the same way."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import numpy as np


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "load_average_at_start": load,
    }
