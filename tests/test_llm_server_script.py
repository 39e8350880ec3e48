"""scripts/llm_server.sh builds llama.cpp portable: the CPU check and the flags it derives
(``--print-build`` installs nothing and starts nothing)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "llm_server.sh"
pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 flag check")


def _print_build(cpuinfo: Path) -> str:
    env = os.environ | {"CPUINFO": str(cpuinfo), "CACHE_DIR": str(cpuinfo.parent / "cache")}
    out = subprocess.run(["bash", str(SCRIPT), "--print-build"], env=env, capture_output=True, text=True,
                         timeout=30, check=True)
    assert not (cpuinfo.parent / "cache").exists()  # nothing installed, nothing downloaded
    return out.stdout


def test_build_is_never_native_and_drops_what_the_cpu_lacks(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 bmi2 fma f16c avx512f\n")
    text = _print_build(full)
    assert "CMAKE_ARGS=-DGGML_NATIVE=OFF -DGGML_AVX512=OFF\n" in text  # AVX-512 never, even when present
    assert "present: sse4_2 avx avx2 bmi2 fma f16c" in text

    old = tmp_path / "old"
    old.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 avx\n")
    args = _print_build(old).split("CMAKE_ARGS=")[1].split()
    assert args[0] == "-DGGML_NATIVE=OFF"
    assert {"-DGGML_AVX2=OFF", "-DGGML_BMI2=OFF", "-DGGML_FMA=OFF", "-DGGML_F16C=OFF"} <= set(args)
    assert "-DGGML_AVX=OFF" not in args and "-DGGML_SSE42=OFF" not in args
