"""python -m benchmarks.programs.rescore [WORDS]: the hook-recorded programs' first-pass rounds (each port as
the commit of that round left it) and slips (each an edit of the raw program) recorded again and compared by the
tool as it is now; one JSON line each (the diagnosis kind, step, words, warnings). docs/programs.md, "After-fix
score", was made with it. WORDS: run only the variants whose "program what" contains them."""

import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.programs.corpus import PROGRAMS
from benchmarks.programs.run import HERE, run_pair
from ddp_parity import compare_traces

REPO = HERE.parents[1]


def port_at(commit, prog):
    return subprocess.run(
        ["git", "show", f"{commit}:benchmarks/programs/{prog}/lightning_port.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


VARIANTS = [
    ("dist_tuto", "round 1", {"lightning_port.py": ("PORT", "37d4792")}),
    ("dist_tuto", "round 2", {"lightning_port.py": ("PORT", "197be5f")}),
    ("barlowtwins", "round 1", {"lightning_port.py": ("PORT", "143b473")}),
    ("barlowtwins", "round 2", {"lightning_port.py": ("PORT", "55ebc02")}),
    ("barlowtwins", "round 3", {"lightning_port.py": ("PORT", "07cd160")}),
    ("vicreg", "round 1", {"lightning_port.py": ("PORT", "69f480d")}),
    ("vicreg", "round 2", {"lightning_port.py": ("PORT", "f792682")}),
    ("vicreg", "round 3", {"lightning_port.py": ("PORT", "56b5371")}),
    ("vicreg", "round 4 (equal pair)", {}),
    ("dist_tuto", "slip: gradients summed", {"train_dist.py": ("        param.grad.data /= size\n", "")}),
    (
        "dist_tuto",
        "slip: lr x world size",
        {"train_dist.py": ("lr=0.01, momentum=0.5", "lr=0.01 * size, momentum=0.5")},
    ),
    (
        "dist_tuto",
        "slip: shuffle=False",
        {"train_dist.py": ("batch_size=bsz, shuffle=True)", "batch_size=bsz, shuffle=False)")},
    ),
    (
        "barlowtwins",
        "slip: lr set after the step",
        {
            "main.py": (
                "            adjust_learning_rate(args, optimizer, loader, step)\n",
                "",
                "            scaler.update()\n",
                "            scaler.update()\n            adjust_learning_rate(args, optimizer, loader, step)\n",
            )
        },
    ),
    ("barlowtwins", "slip: no set_epoch", {"main.py": ("        sampler.set_epoch(epoch)\n", "")}),
    (
        "barlowtwins",
        "slip: weight_decay_filter=False",
        {
            "main.py": (
                "weight_decay_filter=True, lars_adaptation_filter=True",
                "weight_decay_filter=False, lars_adaptation_filter=True",
            )
        },
    ),
    (
        "vicreg",
        "slip: lr x world size",
        {
            "main_vicreg.py": (
                "    base_lr = args.base_lr * args.batch_size / 256\n",
                "    base_lr = args.base_lr * args.batch_size / 256 * args.world_size\n",
            )
        },
    ),
    (
        "vicreg",
        "slip: clip_grad_norm_ added",
        {
            "main_vicreg.py": (
                "            scaler.scale(loss).backward()\n            scaler.step(optimizer)\n",
                (
                    "            scaler.scale(loss).backward()\n            scaler.unscale_(optimizer)\n"
                    "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                    "            scaler.step(optimizer)\n"
                ),
            )
        },
    ),
    (
        "vicreg",
        "slip: FullGatherLayer.backward without all_reduce",
        {"main_vicreg.py": ("        dist.all_reduce(all_gradients)\n", "")},
    ),
    ("moco", "round 1", {"lightning_port.py": ("PORT", "649162c")}),
    ("moco", "round 3", {"lightning_port.py": ("PORT", "ecd4860")}),
    ("moco", "round 4 (equal pair)", {}),
    (
        "moco",
        "slip: no set_epoch",
        {"main_moco.py": ("        if args.distributed:\n            train_sampler.set_epoch(epoch)\n", "")},
    ),
    (
        "moco",
        "slip: shuffle-BN permutation not broadcast",
        {"moco/builder.py": ("        torch.distributed.broadcast(idx_shuffle, src=0)\n", "")},
    ),
    (
        "moco",
        "slip: the global batch not divided by the processes",
        {"main_moco.py": ("            args.batch_size = int(args.batch_size / ngpus_per_node)\n", "")},
    ),
    (
        "moco",
        "slip: a seed per rank",
        {
            "main_moco.py": (
                "        torch.manual_seed(args.seed)  # changed\n",
                "        torch.manual_seed(args.seed + gpu)\n",
            )
        },
    ),
    ("simsiam", "round 1", {"lightning_port.py": ("PORT", "eb7db16")}),
    ("simsiam", "round 2 (equal pair)", {}),
    (
        "simsiam",
        "slip: lr inferred after the batch is divided",
        {
            "main_simsiam.py": (
                "    init_lr = args.lr * args.batch_size / 256\n",
                "",
                "            args.batch_size = int(args.batch_size / ngpus_per_node)\n",
                (
                    "            args.batch_size = int(args.batch_size / ngpus_per_node)\n"
                    "            init_lr = args.lr * args.batch_size / 256\n"
                ),
            )
        },
    ),
    (
        "simsiam",
        "slip: no set_epoch",
        {"main_simsiam.py": ("            train_sampler.set_epoch(epoch)\n", "            pass\n")},
    ),
    (
        "simsiam",
        "slip: no SyncBatchNorm",
        {
            "main_simsiam.py": (
                "        model = SyncBatchNorm.convert_sync_batchnorm(model)  # changed: the stand-in (CPU tensors)\n",
                "",
            )
        },
    ),
    ("vision_classification", "round 1", {"lightning_port.py": ("PORT", "31db27d")}),
    ("vision_classification", "round 2", {"lightning_port.py": ("PORT", "52ace73")}),
    ("vision_classification", "round 3", {"lightning_port.py": ("PORT", "6cca4b3")}),
    ("vision_classification", "round 4", {"lightning_port.py": ("PORT", "2c219bb")}),
    ("vision_classification", "round 5 (equal pair)", {}),
    (
        "vision_classification",
        "slip: lr x world size",
        {"train.py": ("            lr=args.lr,\n", "            lr=args.lr * args.world_size,\n")},
    ),
    (
        "vision_classification",
        "slip: the scheduler stepped per iteration",
        {
            "train.py": (
                "args, model_ema=None, scaler=None):\n",
                "args, model_ema=None, scaler=None, lr_scheduler=None):\n",
                "            optimizer.step()\n",
                "            optimizer.step()\n            lr_scheduler.step()\n",
                "args, model_ema, scaler)\n        lr_scheduler.step()\n",
                "args, model_ema, scaler, lr_scheduler)\n",
            )
        },
    ),
    ("vision_classification", "slip: evaluation left in train() mode", {"train.py": ("    model.eval()\n", "")}),
    ("convnext", "round 1", {"lightning_port.py": ("PORT", "0b405e4")}),
    ("convnext", "round 2", {"lightning_port.py": ("PORT", "ffa457b")}),
    ("convnext", "round 3", {"lightning_port.py": ("PORT", "461fa81")}),
    ("convnext", "round 4", {"lightning_port.py": ("PORT", "04d8da5")}),
    ("convnext", "round 5 (equal pair, the EMA built after the DDP wrap)", {"lightning_port.py": ("PORT", "dcf9c41")}),
    ("convnext", "round 6 (equal pair)", {}),
    (
        "convnext",
        "slip: no set_epoch",
        {"main.py": ("            data_loader_train.sampler.set_epoch(epoch)\n", "            pass\n")},
    ),
    (
        "convnext",
        "slip: the loss not divided by update_freq",
        {
            "engine.py": (
                "            loss /= update_freq\n            grad_norm = loss_scaler(",
                "            grad_norm = loss_scaler(",
            )
        },
    ),
    (
        "convnext",
        "slip: lr x world size",
        {
            "main.py": (
                "    lr_schedule_values = utils.cosine_scheduler(\n        args.lr,\n",
                "    lr_schedule_values = utils.cosine_scheduler(\n        args.lr * utils.get_world_size(),\n",
            )
        },
    ),
    ("ijepa", "round 1", {"lightning_port.py": ("PORT", "cbb5976")}),
    ("ijepa", "round 2 (equal pair)", {}),
    ("ijepa", "slip: no set_epoch", {"src/train.py": ("        unsupervised_sampler.set_epoch(epoch)\n", "")}),
    ("ijepa", "slip: lr x world size", {"src/train.py": ("        ref_lr=lr,\n", "        ref_lr=lr * world_size,\n")}),
    (
        "ijepa",
        "slip: a seed per rank",
        {
            "src/train.py": (
                "    world_size, rank = init_distributed()\n",
                "    world_size, rank = init_distributed()\n    torch.manual_seed(_GLOBAL_SEED + rank)\n",
            )
        },
    ),
    ("dit", "round 1", {"lightning_port.py": ("PORT", "c28416a")}),
    ("dit", "round 2", {"lightning_port.py": ("PORT", "60ace59")}),
    ("dit", "round 3 (EQUIVALENT, the EMA checkpointed one update behind)", {"lightning_port.py": ("PORT", "b8d6174")}),
    ("dit", "round 4 (equal pair)", {}),
    ("dit", "slip: no set_epoch", {"train.py": ("        sampler.set_epoch(epoch)\n", "")}),
    (
        "dit",
        "slip: one seed for every rank",
        {
            "train.py": (
                "    seed = args.global_seed * dist.get_world_size() + rank\n",
                "    seed = args.global_seed\n",
            )
        },
    ),
    (
        "dit",
        "slip: lr x world size",
        {"train.py": ("lr=1e-4, weight_decay=0)", "lr=1e-4 * dist.get_world_size(), weight_decay=0)")},
    ),
    ("dino", "round 1", {"lightning_port.py": ("PORT", "e7be676")}),
    ("dino", "round 2", {"lightning_port.py": ("PORT", "b7b9ae2")}),
    ("dino", "round 3", {"lightning_port.py": ("PORT", "e68f9c7")}),
    ("dino", "round 4", {"lightning_port.py": ("PORT", "cd39de9")}),
    ("dino", "round 5 (equal pair)", {}),
    (
        "dino",
        "slip: weight decay on every group",
        {
            "main_dino.py": (
                "            if i == 0:  # only the first group is regularized\n"
                '                param_group["weight_decay"] = wd_schedule[it]\n',
                '            param_group["weight_decay"] = wd_schedule[it]\n',
            )
        },
    ),
    (
        "dino",
        "slip: clip_grad_norm_",
        {
            "main_dino.py": (
                "            loss.backward()\n            if args.clip_grad:\n"
                "                param_norms = utils.clip_gradients(student, args.clip_grad)\n",
                "            loss.backward()\n            if args.clip_grad:\n"
                "                param_norms = torch.nn.utils.clip_grad_norm_(student.parameters(), args.clip_grad)\n",
            )
        },
    ),
    (
        "dino",
        "slip: lr without the world size",
        {
            "main_dino.py": (
                "args.lr * (args.batch_size_per_gpu * utils.get_world_size()) / 256.0,",
                "args.lr * args.batch_size_per_gpu / 256.0,",
            )
        },
    ),
    ("mae", "round 1", {"lightning_port.py": ("PORT", "c9cf9fb")}),
    ("mae", "round 2", {"lightning_port.py": ("PORT", "80a67f4")}),
    ("mae", "round 3", {"lightning_port.py": ("PORT", "c42610a")}),
    (
        "mae",
        "round 4 (EQUIVALENT, the port wrote no checkpoint after epoch 0)",
        {"lightning_port.py": ("PORT", "a8b63f7")},
    ),
    ("mae", "round 5 (equal pair)", {}),
    (
        "mae",
        "slip: no set_epoch",
        {
            "main_pretrain.py": (
                "        if args.distributed:\n            data_loader_train.sampler.set_epoch(epoch)\n",
                "",
            )
        },
    ),
    ("mae", "slip: the loss not divided by accum_iter", {"engine_pretrain.py": ("        loss /= accum_iter\n", "")}),
    (
        "mae",
        "slip: the effective batch without the world size",
        {
            "main_pretrain.py": (
                "    eff_batch_size = args.batch_size * args.accum_iter * misc.get_world_size()\n",
                "    eff_batch_size = args.batch_size * args.accum_iter\n",
            )
        },
    ),
    ("improved_diffusion", "round 1", {"lightning_port.py": ("PORT", "628bd95")}),
    ("improved_diffusion", "round 2", {"lightning_port.py": ("PORT", "a47dd16")}),
    ("improved_diffusion", "round 3", {"lightning_port.py": ("PORT", "00a1924")}),
    (
        "improved_diffusion",
        "round 4 (EQUIVALENT, the port's EMAs updated after every micro-batch)",
        {"lightning_port.py": ("PORT", "e052f08")},
    ),
    ("improved_diffusion", "round 5 (equal pair)", {}),
    (
        "improved_diffusion",
        "slip: the lr annealed after the step",
        {
            "improved_diffusion/train_util.py": (
                "    def optimize_normal(self):\n        self._log_grad_norm()\n        self._anneal_lr()\n"
                "        self.opt.step()\n",
                "    def optimize_normal(self):\n        self._log_grad_norm()\n        self.opt.step()\n"
                "        self._anneal_lr()\n",
            )
        },
    ),
    (
        "improved_diffusion",
        "slip: the shard dropped (every rank reads every image)",
        {
            "improved_diffusion/image_datasets.py": (
                "        shard=dist.get_rank(),  # changed: was MPI.COMM_WORLD.Get_rank()\n"
                "        num_shards=dist.get_world_size(),  # changed: was MPI.COMM_WORLD.Get_size()\n",
                "        shard=0,\n        num_shards=1,\n",
            )
        },
    ),
    (
        "improved_diffusion",
        "slip: the EMAs updated before the step",
        {
            "improved_diffusion/train_util.py": (
                "    def optimize_normal(self):\n        self._log_grad_norm()\n        self._anneal_lr()\n"
                "        self.opt.step()\n"
                "        for rate, params in zip(self.ema_rate, self.ema_params):\n"
                "            update_ema(params, self.master_params, rate=rate)\n",
                "    def optimize_normal(self):\n        self._log_grad_norm()\n        self._anneal_lr()\n"
                "        for rate, params in zip(self.ema_rate, self.ema_params):\n"
                "            update_ema(params, self.master_params, rate=rate)\n"
                "        self.opt.step()\n",
            )
        },
    ),
    ("swav", "round 1", {"lightning_port.py": ("PORT", "4872b1d")}),
    ("swav", "round 2", {"lightning_port.py": ("PORT", "5be91b7")}),
    ("swav", "round 3 (equal pair)", {}),
    (
        "swav",
        "slip: freeze off by one",
        {
            "main_swav.py": (
                "        if iteration < args.freeze_prototypes_niters:\n",
                "        if iteration <= args.freeze_prototypes_niters:\n",
            )
        },
    ),
    (
        "swav",
        "slip: lr indexed by the epoch's iteration",
        {
            "main_swav.py": (
                '            param_group["lr"] = lr_schedule[iteration]\n',
                '            param_group["lr"] = lr_schedule[it]\n',
            )
        },
    ),
    (
        "swav",
        "slip: SyncBatchNorm dropped",
        {
            "main_swav.py": (
                "        model = convert_sync_batchnorm(model)  # changed: torch's SyncBatchNorm refuses CPU tensors\n",
                "        pass\n",
            )
        },
    ),
    ("detr", "round 1", {"lightning_port.py": ("PORT", "fcf95dc")}),
    ("detr", "round 2", {"lightning_port.py": ("PORT", "d3c65d7")}),
    ("detr", "round 3", {"lightning_port.py": ("PORT", "e951fba")}),
    ("detr", "round 4 (equal pair)", {}),
    ("detr", "slip: backbone lr dropped", {"main.py": ('            "lr": args.lr_backbone,\n', "")}),
    (
        "detr",
        "slip: clip norm dropped from raw's call (2b)",
        {"main.py": ("optimizer, device, epoch, args.clip_max_norm)\n", "optimizer, device, epoch)\n")},
    ),
    (
        "detr",
        "slip: model.train() hoisted out of train_one_epoch",
        {
            "engine.py": ("    model.train()\n    criterion.train()\n", ""),
            "main.py": (
                "    start_time = time.time()\n    for epoch in range(args.start_epoch, args.epochs):\n",
                (
                    "    start_time = time.time()\n    model.train()\n"
                    "    for epoch in range(args.start_epoch, args.epochs):\n"
                ),
            ),
        },
    ),
    ("hifigan", "round 1", {"lightning_port.py": ("PORT", "3b4e6eb")}),
    (
        "hifigan",
        "round 2 (EQUIVALENT, the port checkpointed by ModelCheckpoint, validated by Lightning's loop)",
        {"lightning_port.py": ("PORT", "759efee")},
    ),
    (
        "hifigan",
        "round 3 (EQUIVALENT, the port validated by Lightning's loop)",
        {"lightning_port.py": ("PORT", "1f83df5")},
    ),
    ("hifigan", "round 4 (equal pair)", {}),
    (
        "hifigan",
        "slip: the schedulers stepped every batch",
        {
            "train.py": (
                "        scheduler_g.step()\n        scheduler_d.step()\n",
                "",
                "            optim_g.step()\n",
                "            optim_g.step()\n            scheduler_g.step()\n            scheduler_d.step()\n",
            )
        },
    ),
    (
        "hifigan",
        "slip: the MPD left out of optim_d",
        {
            "train.py": (
                "itertools.chain(msd.parameters(), mpd.parameters()), h.learning_rate",
                "msd.parameters(), h.learning_rate",
            )
        },
    ),
    (
        "hifigan",
        "slip: the generator checkpoint saved from the DDP wrapper",
        {
            "train.py": (
                '{"generator": (generator.module if h.num_gpus > 1 else generator).state_dict()}',
                '{"generator": generator.state_dict()}',
            )
        },
    ),
]


def main(only=None):
    root = Path(tempfile.mkdtemp(prefix="rescore-"))
    out = []
    for i, (prog, what, edits) in enumerate(VARIANTS):
        if only and only not in f"{prog} {what}":
            continue
        program = PROGRAMS[prog]
        folder = root / f"src{i:02d}"
        shutil.copytree(HERE / program.folder, folder, ignore=shutil.ignore_patterns("__pycache__"))
        if prog == "vicreg" and what.startswith("slip"):  # the port imports main_vicreg: it keeps the unslipped one
            shutil.copy(folder / "main_vicreg.py", folder / "main_vicreg_orig.py")
            port = (folder / "lightning_port.py").read_text()
            port = port.replace("import main_vicreg\n", "import main_vicreg_orig as main_vicreg\n")
            port = port.replace("from main_vicreg import", "from main_vicreg_orig import")
            (folder / "lightning_port.py").write_text(port)
        if prog == "moco" and what.startswith("slip"):  # the port imports moco/ and main_moco: it keeps unslipped ones
            shutil.copytree(folder / "moco", folder / "moco_orig")
            shutil.copy(folder / "main_moco.py", folder / "main_moco_orig.py")
            port = (folder / "lightning_port.py").read_text()
            port = port.replace("import moco.builder\nimport moco.loader\n", "import moco_orig as moco\n")
            port = port.replace("from main_moco import", "from main_moco_orig import")
            (folder / "moco_orig" / "__init__.py").write_text("from . import builder, loader  # noqa: F401\n")
            (folder / "lightning_port.py").write_text(port)
        for file, edit in edits.items():
            path = folder / file
            if edit[0] == "PORT":
                path.write_text(port_at(edit[1], prog))
                continue
            text = path.read_text()
            for old, new in zip(edit[::2], edit[1::2]):
                assert text.count(old) == 1, (prog, what, old)
                text = text.replace(old, new)
            path.write_text(text)
        variant = dataclasses.replace(program, folder=str(folder))
        result = run_pair(variant, root / f"work{i:02d}", in_process=True)
        report = {}
        if not result.failed:
            work = root / f"work{i:02d}"
            report = compare_traces(
                *[work / s / program.trace for s in ("raw", "lightning")], ignore_config=program.ignore_config
            )
        d = report.get("diagnosis") or {}
        warnings = report.get("warnings", [])
        row = {
            "work": str(root / f"work{i:02d}"),
            "program": prog,
            "what": what,
            "verdict": result.verdict,
            "failed": result.failed,
            "kind": d.get("kind"),
            "step": d.get("step"),
            "explanation": d.get("explanation"),
            "advice": d.get("advice"),
            "warnings": [w.get("message") for w in warnings],
            "setup_differs": (d.get("setup_differs") or {}).get("explanation"),
        }
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
