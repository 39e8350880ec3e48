"""Benchmarks: the LoCoMo evidence-recall harness, flat baselines, ingest, latency and scale benches.

Everything here measures the public :class:`~ariadnemem_core.AriadneMemory` API (and, for
the flat baseline priced on AriadneMem's own storage, the public indexes of its ``store``),
so the numbers are what a user of the library gets. The benches are plain functions
(``run_locomo``, ``run_ingest``, ``run_latency``, ``run_scale``) and ``ariadnemem bench ...``
commands. The dataset is read from a path given by the caller and never copied (LoCoMo is
CC BY-NC); the scale bench needs none (it generates its dialogue).

The benches need the ``bench`` extra (``pip install "ariadnemem[bench]"``: psutil for the
memory figures); :func:`require_extra` says so clearly when it is missing.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .ingest import run_ingest
    from .latency import run_latency
    from .runner import run_locomo
    from .scale import run_scale

__all__ = ["BENCH_EXTRA_MODULES", "require_extra", "run_ingest", "run_latency", "run_locomo", "run_scale"]

#: Modules of the ``bench`` extra (import name -> distribution).
BENCH_EXTRA_MODULES = {"psutil": "psutil"}


def require_extra() -> None:
    """Check that the ``bench`` extra is installed.

    Raises:
        ConfigError: naming what is missing and the command that installs it.
    """
    missing = [dist for module, dist in BENCH_EXTRA_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise ConfigError(f"the benchmarks need {', '.join(missing)}, which is not installed: "
                          'pip install "ariadnemem[bench]"')


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
