"""Benchmarks: the LoCoMo evidence-recall harness, flat baselines, ingest, latency and scale benches.

Everything here measures the public :class:`~ariadnemem_core.AriadneMemory` API only, so
the numbers are what a user of the library gets. The benches are plain functions
(``run_locomo``, ``run_ingest``, ``run_latency``, ``run_scale``) and ``ariadnemem bench ...``
commands. The dataset is read from a path given by the caller and never copied (LoCoMo is
CC BY-NC); the scale bench needs none (it generates its dialogue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ingest import run_ingest
    from .latency import run_latency
    from .runner import run_locomo
    from .scale import run_scale

__all__ = ["run_ingest", "run_latency", "run_locomo", "run_scale"]


def __getattr__(name: str) -> Any:
    # Lazy: ``import ariadnemem_core.bench.metrics`` must not pull in the runners (and
    # through them sentence-transformers) when only a pure helper is needed.
    if name == "run_locomo":
        from .runner import run_locomo

        return run_locomo
    if name == "run_ingest":
        from .ingest import run_ingest

        return run_ingest
    if name == "run_latency":
        from .latency import run_latency

        return run_latency
    if name == "run_scale":
        from .scale import run_scale

        return run_scale
    raise AttributeError(name)
