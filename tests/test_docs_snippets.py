"""The guides' Python snippets run as written: each page's ```python blocks, in order, as
one script in a fresh directory (a subprocess, offline, no OPENAI_* variables), with the
models the pages themselves define. A snippet that needs an undefined name, a missing
import or a model that cannot do what the page asks fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUIDES = REPO / "docs" / "guides"
#: Pages whose snippets must run top to bottom. (deployment.md needs a Chroma server and
#: pictures.md writes image files: both are covered by their own tests.)
PAGES = ["langchain.md", "llama-index.md", "langgraph.md", "mcp.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def snippets(page: str) -> str:
    """The page's Python blocks joined into one script."""
    blocks = _BLOCK.findall((GUIDES / page).read_text(encoding="utf-8"))
    assert blocks, f"{page} has no python blocks"
    return "\n\n".join(blocks)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.Popen[str]]:
    """Start every page's script at once (each loads the embedding model)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO) + os.pathsep + env.get("PYTHONPATH", "")})
    # An `ariadnemem` command of this checkout first on PATH: the MCP client starts the
    # server with a minimal environment (PATH, HOME, ...), without PYTHONPATH.
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "ariadnemem"
    shim.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
                    "from ariadnemem_core.cli import main\nsys.exit(main())\n", encoding="utf-8")
    shim.chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    procs = {}
    for page in PAGES:
        cwd = tmp_path_factory.mktemp(page.replace(".", "-"))
        (cwd / "snippets.py").write_text(snippets(page), encoding="utf-8")
        procs[page] = subprocess.Popen([sys.executable, "snippets.py"], cwd=cwd, env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    yield procs
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("page", PAGES)
def test_guide_snippets_run(runs: dict[str, subprocess.Popen[str]], page: str) -> None:
    out, err = runs[page].communicate(timeout=240)
    assert runs[page].returncode == 0, f"{page} snippets failed:\n{err[-3000:]}"
    assert "Traceback" not in err
    if page == "langchain.md":
        assert "Ana suggested a small hotel in Alfama." in out  # the scripted agent's answer
        assert "Alfama" in out.split("Ana suggested a small hotel in Alfama.", 1)[1]  # retriever output
    if page == "langgraph.md":
        assert "Your passport expires in May 2027." in out
        assert "Maya's passport expires in May 2027." in out  # recalled through runtime.store
    if page == "mcp.md":
        assert "Porto" in out  # retrieved through the MCP server started by the SDK client
