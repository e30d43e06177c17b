import gc

import torch.distributed as dist

from lightning_impl.cli import cli_main

if __name__ == "__main__":
    cli = cli_main()
    if dist.is_initialized():
        # Lightning keeps the process group after fit; torn down at interpreter exit it can abort
        # (seen once under torchrun). Free the DDP wrapper first, then the group, as raw/train.py does.
        del cli
        gc.collect()
        dist.destroy_process_group()
