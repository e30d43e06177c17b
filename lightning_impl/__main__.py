import contextvars
import gc

import torch.distributed as dist

from lightning_impl.cli import cli_main


def fit_then_free(args=None) -> None:
    """`python -m lightning_impl ARGS`, then the model freed before the process group goes.

    Lightning keeps the process group after fit; torn down at interpreter exit while a module still
    holds it (DDP's wrapper, FSDP2's DTensors and their mesh), it can abort a rank that had finished
    ("terminate called without an active exception"). So the model goes first, then the group, as
    raw/train.py does. jsonargparse leaves its parser in a context variable of this thread, and the
    parser holds the CLI (its instantiators), which holds the trainer and the model: the CLI runs in a
    context of its own, dropped with it."""
    cli = contextvars.copy_context().run(cli_main, args)
    del cli
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    fit_then_free()
