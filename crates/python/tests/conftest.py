"""Targets the tests run on: a local directory always, the loopback S3 server (moto,
started by `cargo xtask python`) when BATCHWEAVE_TEST_S3_URL / _ENDPOINT are set. With
BATCHWEAVE_REQUIRE_SERVERS=1 (CI) a missing server is a failure, not a skip."""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

import batchweave as bw

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Target:
    name: str
    url: str
    options: Dict[str, str] = field(default_factory=dict)

    def open(self) -> bw.Stream:
        return bw.Stream.open(self.url, **self.options)

    def env(self) -> Dict[str, str]:
        """Environment for a CLI process (which reads the AWS_* variables)."""
        env = dict(os.environ)
        if self.options:
            env.update(
                AWS_ENDPOINT=self.options["aws_endpoint"],
                AWS_ALLOW_HTTP="true",
                AWS_ACCESS_KEY_ID="testing",
                AWS_SECRET_ACCESS_KEY="testing",
                AWS_REGION="us-east-1",
            )
        return env


def s3_target() -> Optional[Target]:
    url = os.environ.get("BATCHWEAVE_TEST_S3_URL")
    endpoint = os.environ.get("BATCHWEAVE_TEST_S3_ENDPOINT")
    if not url or not endpoint:
        if os.environ.get("BATCHWEAVE_REQUIRE_SERVERS") == "1":
            pytest.fail("BATCHWEAVE_TEST_S3_URL / _ENDPOINT not set but servers are required")
        return None
    assert endpoint.startswith("http://127.0.0.1:"), endpoint
    return Target(
        "s3",
        f"{url.rstrip('/')}/py-{uuid.uuid4().hex[:12]}",
        {
            "aws_endpoint": endpoint,
            "aws_allow_http": "true",
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "aws_region": "us-east-1",
        },
    )


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "local":
        yield Target("local", str(tmp_path / "stream"))
        return
    t = s3_target()
    if t is None:
        pytest.skip("no loopback S3 server configured (run via `cargo xtask python`)")
    yield t


@pytest.fixture
def local(tmp_path: Path) -> Target:
    return Target("local", str(tmp_path / "stream"))


def find_cli() -> Optional[str]:
    env = os.environ.get("BATCHWEAVE_CLI")
    if env:
        return env
    for d in ["target/python/debug", "target/debug", "target/release"]:
        p = ROOT / d / "batchweave"
        if p.exists():
            return str(p)
    return shutil.which("batchweave")


@pytest.fixture
def cli() -> str:
    path = find_cli()
    if path is None:
        if os.environ.get("BATCHWEAVE_REQUIRE_SERVERS") == "1":
            pytest.fail("the batchweave CLI binary is required (set BATCHWEAVE_CLI)")
        pytest.skip("batchweave CLI not built (cargo build -p batchweave-cli)")
    return path


def produce_items(
    stream: bw.Stream, pid: str, items: List[int], dp: int, cp: int, length: int = 64
) -> None:
    from payload import item_slices

    with stream.producer(pid) as p:
        for i in items:
            p.append(item_slices(i, dp, cp, length), dp=dp, cp=cp, source_offset=i)
