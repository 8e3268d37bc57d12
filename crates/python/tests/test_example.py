"""examples/python/train_tiny_lm.py run three ways (uninterrupted; killed and resumed;
killed twice and resumed twice): every loss equal bit for bit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "python" / "train_tiny_lm.py"
STEPS = 24


def run(*args: str, killed: bool = False) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=600)
    if killed:
        assert r.returncode == -9, r.stderr
    else:
        assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_tiny_lm_resumes_bit_for_bit(tmp_path: Path) -> None:
    stream = str(tmp_path / "stream")
    print(run("produce", "--stream", stream, "--steps", str(STEPS), "--producers", "2"))
    losses: List[str] = []
    for name, kills in [("uninterrupted", []), ("killed-once", [9]), ("killed-twice", [9, 17])]:
        out = str(tmp_path / f"{name}.jsonl")
        train = ["train", "--stream", stream, "--steps", str(STEPS), "--every", "4",
                 "--ckpt", str(tmp_path / f"ckpt-{name}"), "--losses", out]
        for k in kills:
            run(*train, "--kill-at", str(k), killed=True)
        assert "trained to step" in run(*train)
        losses.append(out)
    report = run("compare", *losses)
    print(report)
    assert "IDENTICAL" in report
