"""A training loop of our own, recorded through the public plugin API, with one knob per correct
change of arithmetic and per subtle bug the tolerance benchmark needs (benchmarks/tolerance/__main__.py).

    python -m benchmarks.tolerance.loop RUN_DIR [--threads 2] [--bf16] [--lr-factor 1.01] ...

A 512-1024-1024-10 MLP with dropout 0.1, SGD with momentum in two parameter groups (weights, biases),
on a fixed synthetic classification set; 4096 samples, batches of 128, 10 epochs: 320 steps.
`--stop-at N` trains N steps and saves a snapshot; `--resume` continues from it (under whatever
arithmetic this process runs with).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ddp_parity import TraceRecorder
from ddp_parity.model import nudge_by_ulps

SAMPLES, FEATURES, CLASSES, BATCH, EPOCHS = 4096, 512, 10, 128, 10
SNAPSHOT = "snapshot.pt"


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bf16", action="store_true", help="autocast to bfloat16")
    p.add_argument("--init-ulps-seed", type=int, default=None, help="a weight control: every weight one ulp off")
    # the subtle bugs
    p.add_argument("--lr-factor", type=float, default=1.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--bias-momentum", type=float, default=0.9, help="the bias group's momentum")
    p.add_argument("--class-0-weight", type=float, default=None, help="class weights in the loss: class 0 weighs this")
    p.add_argument("--loss-scale", type=float, default=1.0, help="e.g. 0.25: the loss divided by a world of 4 twice")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--drop-sample", type=int, default=None, help="leave this sample out of its batch, silently")
    p.add_argument("--clip", type=float, default=None, help="clip the gradient norm at this value")
    p.add_argument("--slip-from", type=int, default=1, help="the slips above act from this step on (a late bug)")
    # a snapshot mid-run
    p.add_argument("--stop-at", type=int, default=None)
    p.add_argument("--resume", action="store_true")
    return p.parse_args(argv)


def dataset() -> tuple[torch.Tensor, torch.Tensor]:
    """NumPy's draws (the same bits under any ATen kernel set, unlike torch.randn's), labels by a
    random linear teacher in float64."""
    x = np.random.default_rng(1).standard_normal((SAMPLES, FEATURES), dtype=np.float32)
    teacher = np.random.default_rng(2).standard_normal((FEATURES, CLASSES))
    return torch.from_numpy(x), torch.from_numpy((x.astype(np.float64) @ teacher).argmax(axis=1))


def build(args) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(FEATURES, 1024), nn.ReLU(), nn.Dropout(args.dropout),
        nn.Linear(1024, 1024), nn.ReLU(), nn.Dropout(args.dropout),
        nn.Linear(1024, CLASSES),
    )  # fmt: skip
    if args.init_ulps_seed is not None:
        nudge_by_ulps(net, 1, args.init_ulps_seed)
    weights = [p for n, p in net.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in net.named_parameters() if n.endswith("bias")]
    optimizer = torch.optim.SGD(
        [{"params": weights, "momentum": 0.9}, {"params": biases, "momentum": args.bias_momentum}], lr=0.05
    )
    return net, optimizer


def slip_optimizer(optimizer: torch.optim.Optimizer, args) -> None:
    """The optimizer's slips, made when they start to act (the first group holds the weights)."""
    for group in optimizer.param_groups:
        group["lr"] = 0.05 * args.lr_factor
    optimizer.param_groups[0]["weight_decay"] = args.weight_decay


def main(argv=None) -> None:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    run_dir = Path(args.run_dir)
    x, y = dataset()
    net, optimizer = build(args)
    step = 0
    recorder = TraceRecorder(run_dir, side="loop", config={"bf16": args.bf16})
    if args.resume:
        snapshot = torch.load(run_dir / SNAPSHOT, weights_only=False)
        net.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        torch.set_rng_state(snapshot["rng"])
        step = snapshot["step"]
        recorder.start(resumed_from_step=step)
    else:
        recorder.start()
    net.train()
    for epoch in range(EPOCHS):
        order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(epoch))
        for first in range(0, SAMPLES, BATCH):
            if (epoch * SAMPLES + first) // BATCH < step:
                continue  # done before the snapshot
            indices = order[first : first + BATCH]
            slipping = step + 1 >= args.slip_from
            if step + 1 == args.slip_from:
                slip_optimizer(optimizer, args)
            used = indices[indices != args.drop_sample] if args.drop_sample is not None and slipping else indices
            for module in net.modules():
                if isinstance(module, nn.Dropout):
                    module.p = args.dropout if slipping else 0.1
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                logits = net(x[used])
            smoothing = args.label_smoothing if slipping else 0.0
            weight = None
            if args.class_0_weight is not None and slipping:
                weight = torch.ones(CLASSES).index_fill_(0, torch.tensor([0]), args.class_0_weight)
            loss = F.cross_entropy(logits.float(), y[used], weight=weight, label_smoothing=smoothing)
            optimizer.zero_grad()
            (loss * (args.loss_scale if slipping else 1.0)).backward()
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in net.parameters()])
            if args.clip is not None and slipping:
                torch.nn.utils.clip_grad_norm_(net.parameters(), args.clip)
            optimizer.step()
            step += 1
            batch = (x[used], y[used])
            recorder.record(
                step,
                loss,
                indices.tolist(),
                epoch=epoch,
                grad_norm=grad_norm,
                optimizer=optimizer,
                model=net,
                batch=batch,
            )
            if step == args.stop_at:
                state = {"model": net.state_dict(), "optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()}
                torch.save({**state, "step": step}, run_dir / SNAPSHOT)
                recorder.close()
                return
    recorder.finish(net)


if __name__ == "__main__":
    main()
