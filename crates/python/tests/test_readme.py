"""The README's "Use it from Python" snippet, extracted and run, so it cannot rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def snippet() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section has one runnable Python block"
    return str(blocks[0])


def test_readme_python_snippet_runs(tmp_path: Path) -> None:
    code = snippet()
    assert "import batchweave" in code
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")},
    )
    assert r.returncode == 0, r.stderr
    assert "step 2" in r.stdout, r.stdout
