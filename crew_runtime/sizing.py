"""How many runs a worker process executes at once by default, and why (no CrewAI import).

Crews are LLM-bound: an executing run spends nearly all its time waiting for the model, on a
thread of its own that costs no CPU while it waits. What one more executing run costs a worker
(``bench/concurrency.py``, docs/benchmarks.md section 9) is about 2 threads and a few MiB of
memory, and CPU only when its model answers (tens of ms per call, CrewAI's loop included);
database connections do not grow with it (a worker's pool holds at most 20 on PostgreSQL, one
per statement in flight). So the default is sized for a host that is mostly waiting: 32 runs
at once keep a 2-CPU host busy when calls take about a second, without a person having to
tune it; CPU-bound crews (an offline model) simply take turns. Raise it for slower models
(5-30 s a call: hundreds at once fit one host), lower it where memory is short.
"""

from __future__ import annotations

DEFAULT_CONCURRENCY = 32
"""``countersign worker --concurrency`` and ``serve --workers`` when not given."""
