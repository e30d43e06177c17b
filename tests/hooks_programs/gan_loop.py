"""A GAN's loop, as StyleGAN2's and HiFi-GAN's: a generator and a discriminator, each given to DDP (the generator
first), each with its own optimizer, stepped in turn each iteration (the discriminator first), with requires_grad
toggled per phase. It knows nothing of any recorder. One process in a process group of one (a file store: no port).
With --skip-last-g, the generator takes no step in the last iteration (a loop leaving before its last G phase): the
discriminator trains exactly as without it, the generator ends one update behind. --g-beta2 sets the generator
optimizer's second beta (0.99 by default, as the discriminator's). With --evaluate-after-g K, the generator is
evaluated after iteration K's generator step (eval mode, no gradients, over a DataLoader of noise whose iterator
draws from the global generator, as vits' evaluation on rank 0 does). It prints each iteration's discriminator loss
and the final weights' sha256 of each network.

    python tests/hooks_programs/gan_loop.py STORE_FILE [--skip-last-g] [--g-beta2 B] [--evaluate-after-g K]
"""

from __future__ import annotations

import argparse
import gc
import hashlib

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

ITERATIONS = 4


def requires_grad(model: nn.Module, flag: bool) -> None:
    for p in model.parameters():
        p.requires_grad = flag


def weights_sha256(model: nn.Module) -> str:
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()


def evaluate(generator: nn.Module) -> None:
    generator.eval()
    with torch.no_grad():
        for (noise,) in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4, 4)), batch_size=2):
            generator(noise)
    generator.train()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("store")
    p.add_argument("--skip-last-g", action="store_true", help="no generator step in the last iteration")
    p.add_argument("--g-beta2", type=float, default=0.99, help="the generator optimizer's second beta")
    p.add_argument("--evaluate-after-g", type=int, default=-1, help="evaluate after this iteration's G step")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=0, world_size=1)
    torch.manual_seed(0)
    generator = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6)))
    discriminator = DDP(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1)))
    g_optim = torch.optim.Adam(generator.parameters(), lr=0.01, betas=(0.0, args.g_beta2))
    d_optim = torch.optim.Adam(discriminator.parameters(), lr=0.01, betas=(0.0, 0.99))
    real_data = torch.randn(64, 6, generator=torch.Generator().manual_seed(1))
    for i in range(ITERATIONS):
        real = real_data[i * 8 : (i + 1) * 8]
        requires_grad(generator, False)
        requires_grad(discriminator, True)
        fake = generator(torch.randn(8, 4))
        d_loss = F.softplus(discriminator(fake)).mean() + F.softplus(-discriminator(real)).mean()
        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()
        print(f"iteration {i} d_loss {d_loss.item()!r}", flush=True)
        if args.skip_last_g and i == ITERATIONS - 1:
            break
        requires_grad(generator, True)
        requires_grad(discriminator, False)
        g_loss = F.softplus(-discriminator(generator(torch.randn(8, 4)))).mean()
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        if i == args.evaluate_after_g:
            evaluate(generator)
    print(f"generator {weights_sha256(generator)}", flush=True)
    print(f"discriminator {weights_sha256(discriminator)}", flush=True)
    del generator, discriminator
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
