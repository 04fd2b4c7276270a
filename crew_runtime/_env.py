"""CrewAI phones home unless told not to; set the opt-outs before ``crewai`` is imported.

CrewAI's telemetry, its trace sessions and its PyPI version check all reach the network by
default. ``setdefault`` lets an operator still opt in.

CrewAI also keeps files of its own: its record of the last kickoff
(``latest_kickoff_task_outputs.db``, and a memory's store) under ``CREWAI_STORAGE_DIR``,
by default a directory of ``~/.local/share`` that every project on the machine shares.
Countersign points it into the directory it is started in, ``.countersign/crewai``, as an
absolute path (appdirs then uses it as it is). What CrewAI writes under the home directory
whatever it is told (a key for ``crewai login`` tokens, an empty ``~/.config/crewai``) is in
docs/guide/configuration.md, "Files Countersign and CrewAI write".
"""

from __future__ import annotations

import os

CREWAI_OPT_OUTS = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
    "CREWAI_STORAGE_DIR": os.path.join(os.getcwd(), ".countersign", "crewai"),
}

for _name, _value in CREWAI_OPT_OUTS.items():
    os.environ.setdefault(_name, _value)
