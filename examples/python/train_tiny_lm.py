# mypy: disallow-subclassing-any=False
# (the model subclasses torch.nn.Module, which is Any where torch is not installed)
"""Train a tiny causal language model from a BatchWeave stream, and resume it exactly.

Producers in separate processes pack byte tokens of the Python standard library's own
source files (a corpus every machine has) into global batches and commit them to a
stream; the trainer reads them through ``BatchWeaveDataset``, checkpoints model +
optimizer + ``ds.state_dict()`` every K steps and calls ``checkpoint_committed`` after each
save. Killed at any step and restarted, it continues from its last checkpoint, and with
deterministic torch settings every loss equals the uninterrupted run's, bit for bit on CPU.

    python train_tiny_lm.py produce --stream /tmp/lm --steps 40 --producers 2
    python train_tiny_lm.py train --stream /tmp/lm --steps 40 --ckpt /tmp/ck --losses a.jsonl
    python train_tiny_lm.py train ... --kill-at 17          # dies at step 17 (SIGKILL)
    python train_tiny_lm.py train ...                       # resumes from the checkpoint
    python train_tiny_lm.py compare a.jsonl b.jsonl         # prints the comparison
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import sysconfig
from pathlib import Path
from typing import Dict, Iterator, List

import batchweave as bw

SEQ = 64  # tokens per sequence (plus one for the shifted target)
BATCH = 8  # sequences per global batch
VOCAB = 256  # byte-level tokens


# -- producers ---------------------------------------------------------------------------
def corpus(part: int, parts: int) -> Iterator[bytes]:
    """This producer's share of the standard library's sources, in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.is_file())
    for f in files[part::parts]:
        yield f.read_bytes()


def batches(part: int, parts: int) -> Iterator[bytes]:
    """Online packing: concatenate documents, cut BATCH x (SEQ+1) token windows."""
    need = BATCH * (SEQ + 1)
    buf = bytearray()
    for doc in corpus(part, parts):
        buf += doc + b"\0"
        while len(buf) >= need:
            yield bytes(buf[:need])
            del buf[:need]


def produce_worker(url: str, part: int, parts: int, count: int) -> None:
    stream = bw.Stream.open(url)
    with stream.producer(f"pack-{part}") as p:
        done = p.committed_offset  # exactly-once: skip what this id already committed
        for i, tgb in enumerate(batches(part, parts)):
            if i < done:
                continue
            if i >= count:
                break
            p.append([tgb], dp=1, cp=1, source_offset=i + 1)


def produce(args: argparse.Namespace) -> None:
    per = -(-args.steps // args.producers)
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=produce_worker, args=(args.stream, i, args.producers, per))
        for i in range(args.producers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"producer {p.pid} failed with {p.exitcode}")
    print(f"produced {per * args.producers} global batches with {args.producers} producers")


# -- trainer -----------------------------------------------------------------------------
def train(args: argparse.Namespace) -> None:
    import torch
    from torch import nn

    from batchweave.torch import BatchWeaveDataset

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    class TinyLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 64)
            self.pos = nn.Parameter(torch.zeros(SEQ, 64))
            self.block = nn.TransformerEncoderLayer(
                64, 2, 128, dropout=0.0, batch_first=True
            )
            self.head = nn.Linear(64, VOCAB)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
            h = self.block(self.emb(x) + self.pos, src_mask=mask, is_causal=True)
            out: torch.Tensor = self.head(h)
            return out

    def decode(b: bw.Batch) -> torch.Tensor:
        # Zero-copy view of the slice, then one copy into a writable int64 tensor.
        raw = memoryview(b.data[0])
        t = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        return t.view(BATCH, SEQ + 1).long()

    model = TinyLM().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    ds = BatchWeaveDataset(args.stream, group="train", dp=1, cp=1, rank=0, world_size=1, decode=decode)
    ckpt = Path(args.ckpt)
    start = 0
    if (ckpt / "latest.pt").exists():
        saved = torch.load(ckpt / "latest.pt", weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optim"])
        ds.load_state_dict(saved["data"])
        start = saved["step"]
        print(f"resumed from the checkpoint after step {start}")
    losses = Path(args.losses)
    kept = []
    if losses.exists():
        kept = [line for line in losses.read_text().splitlines() if json.loads(line)["step"] < start]
    losses.write_text("".join(line + "\n" for line in kept))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    step = start
    if step >= args.steps:
        print(f"trained to step {step}")
        return
    with losses.open("a") as log:
        for tokens in loader:
            tokens = tokens.to(device)
            logits = model(tokens[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            opt.zero_grad()
            torch.autograd.backward(loss)
            opt.step()
            step += 1
            log.write(json.dumps({"step": step - 1, "loss": float(loss.item()).hex()}) + "\n")
            log.flush()
            if step % args.every == 0:
                sd = ds.state_dict()
                ckpt.mkdir(parents=True, exist_ok=True)
                tmp = ckpt / "latest.pt.tmp"
                torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "data": sd, "step": step}, tmp)
                os.replace(tmp, ckpt / "latest.pt")
                ds.checkpoint_committed(sd)
            if args.kill_at is not None and step == args.kill_at:
                print(f"killed at step {step}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            if step >= args.steps:
                break
    print(f"trained to step {step}")


def compare(args: argparse.Namespace) -> None:
    runs: List[Dict[int, str]] = []
    for path in args.files:
        runs.append({json.loads(line)["step"]: json.loads(line)["loss"] for line in Path(path).read_text().splitlines()})
    steps = sorted(runs[0])
    same = all(set(r) == set(steps) for r in runs)
    print("step  " + "  ".join(f"{Path(p).stem:>14}" for p in args.files))
    for s in steps:
        vals = [r.get(s) for r in runs]
        mark = "" if len(set(vals)) == 1 else "   <-- differs"
        print(f"{s:4d}  " + "  ".join(f"{float.fromhex(v):14.10f}" if v else f"{'-':>14}" for v in vals) + mark)
        same = same and len(set(vals)) == 1
    print("IDENTICAL: every loss equal bit for bit" if same else "DIFFERENT")
    sys.exit(0 if same else 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--stream", required=True)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--producers", type=int, default=2)
    t = sub.add_parser("train")
    t.add_argument("--stream", required=True)
    t.add_argument("--steps", type=int, default=40)
    t.add_argument("--ckpt", required=True)
    t.add_argument("--every", type=int, default=5)
    t.add_argument("--losses", required=True)
    t.add_argument("--kill-at", type=int, default=None)
    c = sub.add_parser("compare")
    c.add_argument("files", nargs="+")
    args = ap.parse_args()
    {"produce": produce, "train": train, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
