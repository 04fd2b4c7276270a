"""CrewAI phones home unless told not to; set the opt-outs before ``crewai`` is imported.

CrewAI's telemetry, its trace sessions and its PyPI version check all reach the network by
default. ``setdefault`` lets an operator still opt in.
"""

from __future__ import annotations

import os

CREWAI_OPT_OUTS = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
    "CREWAI_STORAGE_DIR": "countersign",
}

for _name, _value in CREWAI_OPT_OUTS.items():
    os.environ.setdefault(_name, _value)
