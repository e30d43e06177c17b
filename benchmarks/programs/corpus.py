"""The programs of the corpus: where each comes from, what it does that the tutorial's loop does not, and the
tiny config both sides run (docs/programs.md)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.programs.basicsr.standins import write_data as write_basicsr_data
from benchmarks.programs.fixmatch.standins import write_data as write_fixmatch_data
from benchmarks.programs.hifigan.standins import write_wavs
from benchmarks.programs.hrnet.standins import write_data as write_hrnet_data
from benchmarks.programs.improved_diffusion.improved_diffusion.standins import write_images
from benchmarks.programs.kair.standins import write_images as write_kair_images
from benchmarks.programs.llmc.standins import write_data as write_llmc_data
from benchmarks.programs.lora.prepare import prepare as prepare_lora
from benchmarks.programs.muon.prepare import write_data as write_muon_data
from benchmarks.programs.nanogpt.prepare import prepare as prepare_nanogpt
from benchmarks.programs.openclip.standins import write_data as write_openclip_data
from benchmarks.programs.pycls.standins import write_data as write_pycls_data
from benchmarks.programs.run import Program
from benchmarks.programs.slip.standins import write_data as write_slip_data
from benchmarks.programs.swav.standins import write_images as write_swav_images
from benchmarks.programs.swin.standins import write_data as write_swin_data
from benchmarks.programs.tacotron2.standins import write_data as write_tacotron2_data
from benchmarks.programs.timm.standins import write_data as write_timm_data
from benchmarks.programs.var.standins import write_data as write_var_data
from benchmarks.programs.vitft.standins import write_data as write_vitft_data
from benchmarks.programs.vits.standins import write_wavs as write_vits_wavs
from benchmarks.programs.vqvae2.standins import write_data as write_vqvae2_data

NANOGPT_TINY = [
    "--out_dir={out}",
    "--dataset=tiny_char",
    "--device=cpu",
    "--backend=gloo",
    "--dtype=float32",
    "--compile=False",
    "--n_layer=2",
    "--n_head=2",
    "--n_embd=32",
    "--block_size=16",
    "--batch_size=4",
    "--gradient_accumulation_steps=4",
    "--max_iters=6",
    "--eval_interval=100",
    "--eval_iters=4",
    "--warmup_iters=2",
    "--lr_decay_iters=6",
    "--learning_rate=1e-3",
    "--min_lr=1e-4",
]

HF_TINY = ["--num_epochs=2", "--batch_size=32", "--train_size=128", "--validation_size=32", "--run_dir={out}/trace"]

STREAM_TINY = ["--epochs=2", "--size=64", "--batch_size=4", "--run_dir={out}/trace"]

DIST_TUTO_TINY = ["--epochs=2", "--size=512"]

SSL_TINY = ["--epochs=2", "--batch-size=16", "--projector=64-64-64"]

VICREG_TINY = ["--data-dir=data", "--epochs=2", "--batch-size=16", "--num-workers=0", "--mlp=64-64-64", "--device=cpu"]

MOCO_TINY = ["data", "--seed=0", "--workers=0", "-b", "16", "--epochs=4", "--mlp", "--aug-plus", "--cos"]
MOCO_TINY += ["--moco-k=64", "--moco-dim=32", "--moco-t=0.2", "--print-freq=1"]
MOCO_DIST = ["--multiprocessing-distributed", "--world-size=1", "--rank=0", "--dist-url=env://", "--dist-backend=gloo"]
SIMSIAM_TINY = ["data", "-a", "resnet50", "--seed=0", "--fix-pred-lr", "--epochs=2", "-b", "16", "-j", "0"]
SIMSIAM_TINY += ["--dim=64", "--pred-dim=16"]
# main_simsiam.py's own launch: one process a device by torch.multiprocessing.spawn, the address from MASTER_ADDR
# and MASTER_PORT (env://)
SIMSIAM_SPAWN = ["--dist-url=env://", "--dist-backend=gloo", "--multiprocessing-distributed", "--world-size=1"]
SIMSIAM_SPAWN += ["--rank=0"]
VISION_TINY = [
    "--data-path=data",
    "--device=cpu",
    "--epochs=3",
    "-b",
    "8",
    "--workers=0",
    "--lr=0.1",
    "--lr-scheduler=cosineannealinglr",
    "--lr-warmup-epochs=1",
    "--lr-warmup-method=linear",
    "--lr-warmup-decay=0.1",
    "--label-smoothing=0.1",
    "--norm-weight-decay=0.0",
    "--clip-grad-norm=1.0",
    "--model-ema",
    "--model-ema-steps=2",
    "--train-crop-size=32",
    "--val-resize-size=36",
    "--val-crop-size=32",
    "--print-freq=100",
    "--output-dir={out}/ckpt",
]

CONVNEXT_TINY = ["--model=convnext_toy", "--data_set=image_folder", "--data_path=data/train"]
CONVNEXT_TINY += ["--eval_data_path=data/val", "--nb_classes=10", "--input_size=32", "--batch_size=8"]
CONVNEXT_TINY += ["--update_freq=2", "--epochs=2", "--warmup_epochs=1", "--drop_path=0.1", "--layer_decay=0.8"]
CONVNEXT_TINY += ["--aa=", "--reprob=0", "--mixup=0", "--cutmix=0", "--smoothing=0.1", "--model_ema=true"]
CONVNEXT_TINY += ["--model_ema_eval=true", "--use_amp=true", "--clip_grad=3.0", "--num_workers=0", "--pin_mem=false"]
CONVNEXT_TINY += ["--device=cpu", "--output_dir={out}/ckpt"]
# I-JEPA reads one YAML config (main.py --fname): the tiny one, by its absolute path (each side runs in its own cwd)
IJEPA_CONFIG = str(Path(__file__).parent / "ijepa" / "configs" / "tiny.yaml")
DIT_TINY = ["--data-path=data", "--model=DiT-T/2", "--image-size=32", "--num-classes=10", "--epochs=2"]
DIT_TINY += [
    "--global-batch-size=8",
    "--num-workers=0",
    "--log-every=4",
    "--ckpt-every=4",
    "--results-dir={out}/results",
]
DINO_TINY = ["--arch=vit_micro", "--patch_size=8", "--out_dim=64", "--local_crops_number=2", "--batch_size_per_gpu=8"]
DINO_TINY += ["--epochs=3", "--warmup_epochs=1", "--freeze_last_layer=1", "--lr=0.01", "--momentum_teacher=0.9"]
DINO_TINY += ["--warmup_teacher_temp_epochs=1", "--teacher_temp=0.07", "--use_fp16=false", "--num_workers=0"]
DINO_TINY += ["--saveckp_freq=2", "--data_path=data", "--output_dir={out}/out"]

MAE_TINY = ["--model=mae_vit_tiny_patch8", "--input_size=32", "--batch_size=8", "--accum_iter=2", "--epochs=3"]
MAE_TINY += ["--warmup_epochs=1", "--norm_pix_loss", "--data_path=data", "--device=cpu", "--num_workers=0"]
MAE_TINY += ["--output_dir={out}/output", "--log_dir={out}/log"]

IMPROVED_DIFFUSION_TINY = ["--data_dir=data", "--image_size=8", "--num_channels=32", "--num_res_blocks=1"]
IMPROVED_DIFFUSION_TINY += ["--attention_resolutions=4", "--diffusion_steps=100", "--batch_size=4", "--microbatch=2"]
IMPROVED_DIFFUSION_TINY += ["--lr_anneal_steps=6", "--save_interval=3", "--log_interval=1", "--ema_rate=0.9,0.99"]
IMPROVED_DIFFUSION_TINY += ["--log_dir={out}/logs"]

SWAV_TINY = ["--data_path=data/train", "--nmb_crops", "2", "2", "--size_crops", "24", "16", "--min_scale_crops", "0.3"]
SWAV_TINY += ["0.1", "--max_scale_crops", "1", "0.3", "--crops_for_assign", "0", "1", "--temperature=0.1"]
SWAV_TINY += ["--epsilon=0.05", "--sinkhorn_iterations=3", "--feat_dim=16", "--nmb_prototypes=10", "--queue_length=16"]
SWAV_TINY += ["--epoch_queue_starts=1", "--epochs=2", "--batch_size=4", "--base_lr=0.6", "--final_lr=0.0006"]
SWAV_TINY += ["--freeze_prototypes_niters=3", "--wd=1e-6", "--warmup_epochs=1", "--start_warmup=0.3"]
SWAV_TINY += ["--arch=resnet_tiny", "--hidden_mlp=32", "--workers=0", "--checkpoint_freq=1", "--use_fp16=false"]
SWAV_TINY += ["--sync_bn=pytorch", "--dump_path={out}/dump"]

DETR_TINY = ["--device=cpu", "--coco_path=data", "--num_workers=0", "--backbone=resnet_tiny", "--hidden_dim=32"]
DETR_TINY += ["--nheads=2", "--enc_layers=1", "--dec_layers=2", "--dim_feedforward=64", "--num_queries=8"]
DETR_TINY += ["--batch_size=2", "--epochs=2", "--lr_drop=1", "--output_dir={out}/out"]

# hifi-gan reads one JSON config (--config): the tiny one, by its absolute path (each side runs in its own cwd)
HIFIGAN_TINY = ["--config=" + str(Path(__file__).parent / "hifigan" / "config_tiny.json")]
HIFIGAN_TINY += ["--input_wavs_dir=data/wavs", "--input_training_file=data/training.txt"]
HIFIGAN_TINY += ["--input_validation_file=data/validation.txt", "--checkpoint_path={out}/cp", "--training_epochs=2"]
HIFIGAN_TINY += ["--stdout_interval=1", "--checkpoint_interval=3", "--summary_interval=1", "--validation_interval=1000"]

EDM_TINY = ["--outdir={out}/training-runs", "--data=synthetic-8x8", "--arch=ddpmpp", "--precond=edm", "--cbase=16"]
EDM_TINY += ["--cres=1,1", "--duration=0.000064", "--batch=8", "--batch-gpu=2", "--lr=1e-3", "--lr-rampup=0.032"]
EDM_TINY += ["--ema=0.5", "--dropout=0.13", "--augment=0", "--seed=0", "--workers=1", "--tick=1", "--snap=1"]
EDM_TINY += ["--dump=1"]
LORA_TINY = ["--train_data=data/train.jsonl", "--valid_data=data/valid.jsonl", "--train_batch_size=4"]
LORA_TINY += ["--valid_batch_size=4", "--grad_acc=2", "--seq_len=16", "--model_card=gpt2.tiny", "--platform=local"]
LORA_TINY += ["--clip=1.0", "--lr=0.01", "--weight_decay=0.01", "--correct_bias", "--adam_beta2=0.999"]
LORA_TINY += ["--scheduler=linear", "--warmup_step=4", "--max_epoch=2", "--save_interval=4", "--eval_interval=6"]
LORA_TINY += ["--log_interval=2", "--lora_dim=4", "--lora_alpha=32", "--lora_dropout=0.1", "--label_smooth=0.1"]
LORA_TINY += ["--random_seed=110", "--work_dir={out}/work"]
# KAIR reads one JSON option file with // comments (--opt): the tiny one, by its absolute path (each side runs in its
# own cwd); --dist True: init_dist('pytorch') under torchrun
KAIR_TINY = ["--opt", str(Path(__file__).parent / "kair" / "options" / "train_dncnn.json"), "--dist", "True"]

DEIT_TINY = ["--model=deit_nano_patch4_16", "--input-size=16", "--data-set=SYNTH", "--data-path=unused"]
DEIT_TINY += ["--batch-size=64", "--epochs=3", "--warmup-epochs=1", "--lr=2e-3", "--min-lr=1e-5", "--warmup-lr=1e-6"]
DEIT_TINY += ["--model-ema-decay=0.99", "--clip-grad=1.0", "--aa=", "--color-jitter=0", "--reprob=0", "--num_workers=0"]
DEIT_TINY += ["--no-pin-mem", "--device=cpu", "--seed=0", "--output_dir={out}/ckpt"]
# stylegan2-pytorch: the LMDB path is a name only (the stand-in makes the images in memory); 3 iterations with R1 and
# path-length regularization at iterations 0 and 2 (10 optimizer steps a rank); sample/ and checkpoint/ under {out}
STYLEGAN2_TINY = ["data", "--iter=3", "--batch=2", "--n_sample=4", "--size=8", "--d_reg_every=2", "--g_reg_every=2"]
STYLEGAN2_TINY += ["--channel_multiplier=1", "--work_dir={out}"]
# main_moco.py's own launch: one process a device by torch.multiprocessing.spawn (2 on CPU), the address from
# MASTER_ADDR and MASTER_PORT (env://, one of its --dist-url forms); checkpoints in the side's cwd
MOCOV3_TINY = ["data", "-a", "resnet50", "--seed=0", "--workers=0", "-b", "16", "--epochs=2", "--warmup-epochs=1"]
MOCOV3_TINY += ["--moco-dim=16", "--moco-mlp-dim=32", "--moco-m-cos", "--moco-t=0.2", "--print-freq=1"]
MOCOV3_SPAWN = ["--multiprocessing-distributed", "--world-size=1", "--rank=0", "--dist-url=env://"]
MOCOV3_SPAWN += ["--dist-backend=gloo"]

# tacotron2: its own launcher multiproc.py spawns train.py (by its absolute path) once a rank, which joins by a tcp://
# URL from MASTER_ADDR/MASTER_PORT; the tiny hparams through the authors' own --hparams string (HParams.parse)
TACOTRON2_HPARAMS = "distributed_run=True,dist_backend=gloo,epochs=3,iters_per_checkpoint=4,"
TACOTRON2_HPARAMS += "training_files=data/train.txt,validation_files=data/val.txt,text_cleaners=[basic_cleaners],"
TACOTRON2_HPARAMS += "sampling_rate=8000,filter_length=256,hop_length=64,win_length=256,n_mel_channels=8,"
TACOTRON2_HPARAMS += "mel_fmax=4000.0,"
TACOTRON2_HPARAMS += "symbols_embedding_dim=16,encoder_kernel_size=3,encoder_embedding_dim=16,decoder_rnn_dim=16,"
TACOTRON2_HPARAMS += "prenet_dim=8,attention_rnn_dim=16,attention_dim=8,attention_location_n_filters=4,"
TACOTRON2_HPARAMS += "attention_location_kernel_size=5,postnet_embedding_dim=8,postnet_kernel_size=3,"
TACOTRON2_HPARAMS += "postnet_n_convolutions=3,batch_size=2"
tacotron2_TINY = ["-o", "{out}/out", "-l", "logs", "--hparams=" + TACOTRON2_HPARAMS]
TACOTRON2_TRAIN = str(Path(__file__).parent / "tacotron2" / "train.py")

# SLIP: the CC3M branch of its data set (a metadata .npy and PNG files written by prepare), a tiny SLIP (ViT of 2 blocks
# of 32 dims, a 1-layer text transformer), 4 optimizer steps an epoch with --update-freq 2, AMP off on CPU, no workers
SLIP_TINY = ["--dataset=cc3m", "--root=data", "--metadata=data/cc3m.npy", "--model=SLIP_VITTINY", "--ssl-mlp-dim=32"]
SLIP_TINY += ["--ssl-emb-dim=16", "--epochs=2", "--warmup-epochs=1", "--batch-size=4", "--update-freq=2"]
SLIP_TINY += ["--disable-amp", "-j", "0", "--print-freq=1", "--output-dir={out}/out"]

# pycls: run_net.py --mode train with the tiny YAML config (by its absolute path: each side runs in its own cwd) and
# OUT_DIR among the authors' KEY VALUE overrides; its own launcher (distributed.multi_proc_run: torch.multiprocessing,
# fork) joins on the MASTER_PORT given
PYCLS_TINY = ["--mode", "train", "--cfg", str(Path(__file__).parent / "pycls" / "configs" / "tiny.yaml")]
PYCLS_TINY += ["OUT_DIR", "{out}/out"]

# BasicSR: train.py -opt with the tiny option file (by its absolute path: each side runs in its own cwd), --launcher
# pytorch (torchrun's env, init_dist), the experiments folder under the side's {out} by the authors' --force_yml
BASICSR_TINY = ["-opt", str(Path(__file__).parent / "basicsr" / "options" / "train_MSRResNet_x2_tiny.yml")]
BASICSR_TINY += ["--launcher", "pytorch", "--force_yml", "path:experiments_root={out}/experiments"]

# Swin-Transformer: main.py --cfg with the tiny YAML (by its absolute path: each side runs in its own cwd), its own
# command-line overrides (batch size, accumulation steps, AMP off), the output folder under the side's {out}
SWIN_TINY = ["--cfg", str(Path(__file__).parent / "swin" / "configs" / "swin_tiny_port.yaml"), "--data-path", "data"]
SWIN_TINY += ["--batch-size", "4", "--accumulation-steps", "2", "--disable_amp", "--output", "{out}/output"]

# vits reads one JSON config (-c): the tiny one, by its absolute path (each side runs in its own cwd); -m names the
# model directory (logs, G_*.pth and D_*.pth checkpoints), under the side's {out}
VITS_TINY = ["-c", str(Path(__file__).parent / "vits" / "configs" / "ljs_tiny.json"), "-m", "{out}/model"]

# FixMatch: 48 synthetic 32 x 32 images (20 labeled, 2 a class; all 48 unlabeled), a WideResNet 10x1, 2 labeled + 4
# unlabeled images (x2 views) a rank a step, 4 steps an "epoch" (--eval-step), 8 in all; the labeled loader (5 batches a
# rank) and the unlabeled one (6) run out at other steps; the program's own --seed (it seeds nothing without it)
FIXMATCH_TINY = ["--dataset=cifar10", "--num-labeled=20", "--batch-size=2", "--mu=2", "--total-steps=8"]
FIXMATCH_TINY += ["--eval-step=4", "--warmup=2", "--threshold=0.2", "--ema-decay=0.9", "--num-workers=0", "--seed=0"]
FIXMATCH_TINY += ["--no-progress", "--out={out}/result"]
# vq-vae-2's train_vqvae.py spawns its ranks itself (distributed.launch, mp.spawn); env:// reads MASTER_ADDR/PORT
VQVAE2_TINY = ["--n_gpu=2", "--size=16", "--epoch=2", "--sched=cycle", "--dist_url=env://", "data"]

# ViT-pytorch: a tiny ViT (patch 8, 32 dims, 2 layers, 2 heads) built from scratch (no pretrained npz) on 40 + 16
# synthetic 32 x 32 images; 8 a rank an optimizer step as 2 micro-batches of 4 (5 micro-batches a rank an epoch, so one
# is left over into the next epoch's first step), 5 steps over 3 epochs, a validation on rank 0 every 2 steps
VITFT_TINY = ["--name=tiny", "--model_type=ViT-tiny", "--pretrained_dir=", "--output_dir={out}/output", "--img_size=32"]
VITFT_TINY += ["--train_batch_size=8", "--gradient_accumulation_steps=2", "--eval_batch_size=8", "--eval_every=2"]
VITFT_TINY += ["--num_steps=5", "--warmup_steps=2", "--learning_rate=0.03"]

# timm: train.py (v1.0.14) on 24 + 8 synthetic 16 x 16 images in 3 class folders (prepare); resnet10t narrowed to
# channels (8, 8, 16, 16), stem 8; 4 images a rank a micro-batch, 3 micro-batches a rank an epoch, 2 accumulated per
# update (the last alone): 2 updates an epoch, 3 epochs; AdamW, cosine stepped per update after a 1-epoch warmup,
# mixup/cutmix with label smoothing, clipping by norm, EMA 0.9 evaluated every epoch, --dist-bn reduce; one loader
# worker (timm's loaders are persistent: 0 workers raise); its own --seed; checkpoints under {out}
TIMM_TINY = ["--data-dir", "data", "--model", "resnet10t", "--model-kwargs", "channels=(8,8,16,16)", "stem_width=8"]
TIMM_TINY += ["--num-classes", "3", "--img-size", "16", "--device", "cpu", "--no-prefetcher", "--workers", "1"]
TIMM_TINY += ["--batch-size", "4", "--grad-accum-steps", "2", "--epochs", "3", "--sched", "cosine"]
TIMM_TINY += ["--sched-on-updates", "--warmup-epochs", "1", "--warmup-lr", "1e-4", "--opt", "adamw", "--lr", "1e-3"]
TIMM_TINY += ["--weight-decay", "0.05", "--color-jitter", "0", "--mixup", "0.2", "--cutmix", "1.0"]
TIMM_TINY += ["--smoothing", "0.1"]
TIMM_TINY += ["--clip-grad", "1.0", "--clip-mode", "norm", "--model-ema", "--model-ema-decay", "0.9"]
TIMM_TINY += ["--dist-bn", "reduce", "--seed", "0", "--log-interval", "1", "--checkpoint-hist", "2"]
TIMM_TINY += ["--output", "{out}", "--experiment", "tiny"]

# VAR: train.py from torchrun's environment (its dist.py, gloo); 20 + 8 synthetic 64 x 64 images in 2 class folders
# and a random-init tiny VQ-VAE (V=64, Cvae=8, ch=32) written by prepare; a VAR of depth 2 over patch_nums 1,2,3,4; a
# global batch of 8 (4 a rank), 3 iterations an epoch (the last filled), 2 epochs; warmup of half an epoch, progressive
# training from stage 1 over 80% of it, label smoothing 0.1, fp32; the program's own --seed (unseeded without it)
VAR_TINY = ["--data_path=data", "--local_out_dir_path={out}/local_output", "--depth=2", "--pn=1_2_3_4", "--bs=8"]
VAR_TINY += ["--ep=2", "--wp=0.5", "--tblr=0.1", "--ls=0.1", "--pg=0.8", "--pg0=1", "--pgwp=0.5", "--seed=1"]
VAR_TINY += ["--workers=0", "--fp16=0"]

# open_clip: 32 + 8 synthetic 16 x 16 images and captions (a tab-separated CSV), a tiny ViT CLIP, 4 images a rank a
# micro-batch, --accum-freq 2 (2 optimizer steps an epoch), 2 epochs; the log folder by an absolute --name under the
# side's {out} (torchrun's own parser takes --logs for its --logs-specs)
OPENCLIP_TINY = ["--train-data=data/train.csv", "--val-data=data/val.csv", "--dataset-type=csv", "--model=tiny-ViT"]
OPENCLIP_TINY += ["--batch-size=4", "--epochs=2", "--lr=1e-3", "--wd=0.1", "--warmup=2", "--workers=0", "--seed=0"]
OPENCLIP_TINY += ["--precision=fp32", "--dist-backend=gloo", "--accum-freq=2", "--name={out}/tiny"]

# HRNet-Semantic-Segmentation: tools/train.py with its yacs config (a tiny YAML of the port's own) and the config's
# command-line overrides: the output and log folders under the side's {out}
HRNET_TINY = ["--cfg", str(Path(__file__).parent / "hrnet" / "experiments" / "seg_hrnet_tiny_32x32_ohem_sgd.yaml")]
HRNET_TINY += ["OUTPUT_DIR", "{out}/output", "LOG_DIR", "{out}/log"]


def prepare_hrnet(work: Path) -> None:
    """The cityscapes-style lists and images under data/, and each side's output folder: create_logger makes it with
    a plain mkdir on every rank (no parents, no exist_ok), which two ranks race for."""
    write_hrnet_data(str(work / "data"))
    for side in ("raw", "lightning"):
        (work / side / "output").mkdir(parents=True, exist_ok=True)


IMAGENET_TINY = ["--epochs=3", "-b", "16", "--seed=0", "--print-freq=100", "--run-dir={out}/trace"]

# cleanrl ppo_atari_multigpu.py: 2 envs a rank (a small deterministic Atari-like env, standins.py), 16 steps a
# rollout, 3 iterations (total 192 = 3 x 2 ranks x 2 envs x 16), 2 update epochs of 2 minibatches (16 samples), an
# approximate-KL early stop at 5e-6 (it stops iteration 1 after its first epoch on both ranks): 10 optimizer steps a
# rank; no data files (the env draws its frames from a generator seeded by the env seed)
PPO_TINY = ["--total-timesteps", "192", "--local-num-envs", "2", "--num-steps", "16", "--num-minibatches", "2"]
PPO_TINY += ["--update-epochs", "2", "--target-kl", "5e-6"]

# karpathy/llm.c train_gpt2.py: a GPT of 2 layers x 32 wide (2 heads), vocab 256, 16-token sequences; 2 ranks x 2
# sequences x 2 accumulation steps a step (total_batch_size 128 tokens), 8 steps over 2 train shards of 300 tokens
# (each read twice), the val loss at steps 0, 4 and 8 over 2 batches of a 200-token shard; ZeRO stage 1
LLMC_TINY = ["--input_bin", "data/llmc_train_*.bin", "--input_val_bin", "data/llmc_val_*.bin"]
LLMC_TINY += ["--output_dir", "{out}/log", "--model", "d2", "--batch_size", "2", "--sequence_length", "16"]
LLMC_TINY += ["--total_batch_size", "128", "--num_iterations", "8", "--learning_rate", "1e-3", "--warmup_iters", "2"]
LLMC_TINY += ["--learning_rate_decay_frac", "0.0", "--weight_decay", "0.1", "--grad_clip", "0.5"]
LLMC_TINY += ["--val_loss_every", "4", "--val_max_steps", "2", "--sample_every", "0", "--overfit_single_batch", "0"]
LLMC_TINY += ["--device", "cpu", "--compile", "0", "--flash", "0", "--dtype", "float32", "--zero_stage", "1"]
LLMC_TINY += ["--write_tensors", "0"]

PROGRAMS = {
    p.name: p
    for p in [
        Program(
            name="nanogpt",
            folder="nanogpt",
            raw=["train.py", *NANOGPT_TINY],
            port=["lightning_port.py", *NANOGPT_TINY],
            style="weight tying; random windows by torch.randint, no DataLoader; lr by hand every iteration; "
            "accumulation via require_backward_grad_sync; evaluation at iteration 0 on rank 0",
            source="karpathy/nanoGPT train.py, model.py, configurator.py (MIT)",
            prepare=lambda work: prepare_nanogpt(str(work)),
            ignore_config=("out_dir",),
        ),
        Program(
            name="ddp_tutorial",
            folder="ddp_tutorial",
            raw=["multigpu_torchrun.py", "2", "1", "--batch_size=32", "--run_dir={out}/trace"],
            port=["lightning_port.py", "2", "1", "--batch_size=32", "--run_dir={out}/trace"],
            style="the classic: a map-style Dataset, DataLoader + DistributedSampler, SGD, a snapshot every epoch",
            source="pytorch/examples distributed/ddp-tutorial-series/multigpu_torchrun.py, datautils.py (BSD-3-Clause)",
        ),
        Program(
            name="hf_accelerate",
            folder="hf_accelerate",
            raw=["nlp_example.py", *HF_TINY],
            port=["lightning_port.py", *HF_TINY],
            style="dict batches (model(**batch), outputs.loss); accumulation by `step % n == 0`; a per-step "
            "warmup scheduler; accuracy over gathered predictions each epoch",
            source="huggingface/accelerate examples/nlp_example.py (Apache-2.0); accelerate, transformers and "
            "datasets stood in for by plain torch (standins.py)",
        ),
        Program(
            name="iterable",
            folder="iterable",
            raw=["train.py", *STREAM_TINY],
            port=["lightning_port.py", *STREAM_TINY],
            style="an IterableDataset of indices split by rank and worker (no sampler at all); the DDP "
            "tutorial's ToyModel, MSELoss and SGD",
            source="pytorch/pytorch torch/utils/data/dataset.py (IterableDataset docstring example) and "
            "pytorch/tutorials intermediate_source/ddp_tutorial.rst demo_basic (BSD-3-Clause)",
        ),
        Program(
            name="imagenet",
            folder="imagenet",
            raw=["main.py", *IMAGENET_TINY],
            port=["lightning_port.py", *IMAGENET_TINY],
            style="the lr set by hand every epoch (adjust_learning_rate); the global batch divided by the world "
            "size; validation of the whole set on every rank, averaged by AverageMeter",
            source="pytorch/examples imagenet/main.py, the adjust_learning_rate version (BSD-3-Clause); "
            "ImageFolder and resnet18 stood in for by synthetic images and a tiny CNN",
        ),
        # recorded with no line changed (ddp-parity record's hooks), first-pass scored before any tool change
        Program(
            name="dist_tuto",
            folder="dist_tuto",
            raw=["train_dist.py", *DIST_TUTO_TINY],
            port=["lightning_port.py", *DIST_TUTO_TINY],
            style="no DDP wrapper: gradients averaged by hand (all_reduce, then / world size); a DataPartitioner "
            "split by rank, shuffled by each rank's own loader; ranks started by torch.multiprocessing",
            source="pytorch/tutorials intermediate_source/dist_tuto.rst, Distributed Training (BSD-3-Clause); "
            "MNIST stood in for by synthetic images",
            recording="hooks",
            raw_launch="python",
        ),
        Program(
            name="barlowtwins",
            folder="barlowtwins",
            raw=["main.py", "data", "--workers=0", *SSL_TINY, "--checkpoint-dir={out}/checkpoint"],
            port=["lightning_port.py", "data", "--workers=0", *SSL_TINY],
            style="ranks by torch.multiprocessing.spawn; LARS (a step without closure) over two param groups; "
            "the lr set by hand every step; GradScaler; an all_reduce inside forward; two augmented views",
            source="facebookresearch/barlowtwins main.py (MIT); torchvision and ImageNet stood in for (standins.py)",
            recording="hooks",
            suite=False,  # the suite's budget: moco stands for the self-supervised family there
            raw_launch="python",
        ),
        Program(
            name="vicreg",
            folder="vicreg",
            raw=["main_vicreg.py", *VICREG_TINY, "--exp-dir={out}/exp"],
            port=["lightning_port.py", *VICREG_TINY, "--exp-dir={out}/exp"],
            style="env:// init under torchrun; LARS with filter functions in its param group; the lr set by hand "
            "every step; an all_gather with its own backward in the loss; augmentations drawn from numpy",
            source="facebookresearch/vicreg main_vicreg.py, distributed.py, augmentations.py (MIT, 4e12602); "
            "torchvision, ImageNet and the ResNet stood in for (standins.py, resnet.py)",
            recording="hooks",
            suite=False,  # the suite's budget: moco stands for the self-supervised family there
        ),
        Program(
            name="moco",
            folder="moco",
            raw=["main_moco.py", *MOCO_TINY, *MOCO_DIST],
            port=["lightning_port.py", *MOCO_TINY],
            style="ranks by torch.multiprocessing.spawn; a key encoder updated by momentum under no_grad; the queue "
            "of keys as buffers; shuffle-BN (all_gather, a permutation broadcast from rank 0); the lr set by hand "
            "every epoch (cosine); two augmented views drawn from torch's and Python's RNGs",
            source="facebookresearch/moco main_moco.py, moco/builder.py, moco/loader.py (MIT, 7397dfe); torchvision "
            "and ImageNet stood in for (standins.py)",
            recording="hooks",
            raw_launch="python",
        ),
        Program(
            name="simsiam",
            folder="simsiam",
            raw=["main_simsiam.py", *SIMSIAM_TINY, *SIMSIAM_SPAWN],
            port=["lightning_port.py", *SIMSIAM_TINY],
            style="ranks by torch.multiprocessing.spawn (env:// init); SyncBatchNorm (a CPU stand-in: statistics "
            "all-reduced inside forward); SGD over two param groups, the predictor's lr fixed; the lr set by hand "
            "every epoch (cosine); DistributedSampler + set_epoch; a stop-gradient on two views; a checkpoint "
            "each epoch on rank 0",
            source="facebookresearch/simsiam main_simsiam.py, simsiam/builder.py, simsiam/loader.py (CC-BY-NC 4.0, "
            "a7bc177); torchvision, ImageNet and SyncBatchNorm on a CPU stood in for (standins.py)",
            recording="hooks",
            suite=False,  # the suite's budget: moco stands for the self-supervised family there
            raw_launch="python",
        ),
        Program(
            name="vision_classification",
            folder="vision_classification",
            raw=["train.py", *VISION_TINY],
            port=["lightning_port.py", *VISION_TINY],
            style="env:// init under torchrun (utils.init_distributed_mode); SGD over norm/other weight-decay groups "
            "(utils.set_weight_decay); label smoothing; a linear warmup + cosine SequentialLR stepped per epoch; "
            "clip_grad_norm_ over model.parameters(); an EMA model (AveragedModel) reset during warmup; evaluation "
            "reduced by reduce_across_processes; checkpoints on the master",
            source="pytorch/vision references/classification train.py, utils.py, presets.py, sampler.py "
            "(BSD-3-Clause); torchvision, ImageNet and the models stood in for (standins.py)",
            recording="hooks",
        ),
        Program(
            name="convnext",
            folder="convnext",
            raw=["main.py", *CONVNEXT_TINY],
            port=["lightning_port.py", *CONVNEXT_TINY],
            style="env:// init under torchrun, a seed per rank (seed + rank); layer-wise lr decay param groups "
            "(LayerDecayValueAssigner, lr_scale) under AdamW; lr and weight decay set by hand on every param group at "
            "every micro-batch (cosine_scheduler); accumulation by update_freq with no no_sync (DDP reduces every "
            "micro-batch); GradScaler + clip_grad_norm_ over model.parameters() (NativeScalerWithGradNormCount, "
            "--use_amp: switched off on a CPU, the clip stays); drop path drawn in forward; label smoothing; an EMA "
            "model built before the DDP wrap, evaluated after the model",
            source="facebookresearch/ConvNeXt main.py, engine.py, utils.py, optim_factory.py, datasets.py, "
            "models/convnext.py (MIT, 048efce); timm, torchvision and ImageNet stood in for (standins.py)",
            recording="hooks",
            suite=False,
        ),
        Program(
            name="ijepa",
            folder="ijepa",
            raw=["main.py", "--fname", IJEPA_CONFIG, "--devices", "cpu:0", "cpu:1"],
            port=["lightning_port.py", "--fname", IJEPA_CONFIG],
            style="ranks by multiprocessing.Process (spawn), init_distributed with a fixed port; three DDP wrappers "
            "(a ViT context encoder and a predictor with static_graph, a target encoder with no gradient) and one "
            "AdamW over four param groups; the lr (warmup + cosine) and the weight decay (cosine, groups without "
            "WD_exclude) set by hand every iteration; the target encoder updated by EMA with a momentum schedule "
            "after each step; a mask collator drawing its blocks from the global generator; the loss all-reduced "
            "inside autograd; a disabled GradScaler's path; the seed set at import",
            source="facebookresearch/ijepa main.py, src/train.py, helper.py, masks/, utils/, models/"
            "vision_transformer.py, datasets/imagenet1k.py, transforms.py (CC-BY-NC 4.0, 52c1ae9); torchvision "
            "and ImageNet stood in for (standins.py), a 2-block ViT of 32 dims",
            recording="hooks",
            raw_launch="python",
            suite=False,
        ),
        Program(
            name="dit",
            folder="dit",
            raw=["train.py", *DIT_TINY],
            port=["lightning_port.py", *DIT_TINY],
            style="torchrun (env:// init) with a seed per rank (global_seed * world_size + rank); an EMA copy of the "
            "model outside DDP (requires_grad False) updated after every step; random diffusion timesteps, VAE "
            "latent samples, noise and label dropout drawn from the global generator each step; a loss all_reduce "
            "every --log-every steps; checkpoints on rank 0 behind a barrier",
            source="facebookresearch/DiT train.py, models.py, diffusion/ (CC-BY-NC 4.0, ed81ce2); torchvision, "
            "ImageNet, timm and diffusers' VAE stood in for (standins.py)",
            recording="hooks",
            suite=False,
        ),
        Program(
            name="dino",
            folder="dino",
            raw=["main_dino.py", *DINO_TINY],
            port=["lightning_port.py", *DINO_TINY],
            style="torchrun (env:// init) with one seed for every rank; a student in DDP and an EMA teacher beside "
            "it (momentum from a cosine schedule); lr and weight decay set by hand every iteration from cosine "
            "schedules (regularized / not groups); gradients clipped per parameter; the last layer's gradients "
            "cancelled in the first epoch; DINOLoss's center updated by an all_reduce; multi-crop (2 global + 2 local "
            "crops, the teacher fed the global ones) drawn from the global torch and Python generators; a checkpoint "
            "each epoch on rank 0",
            source="facebookresearch/dino main_dino.py, utils.py, vision_transformer.py (Apache-2.0, 7c446df); "
            "torchvision and ImageNet stood in for (standins.py)",
            recording="hooks",
            suite=False,
        ),
        Program(
            name="mae",
            folder="mae",
            raw=["main_pretrain.py", *MAE_TINY],
            port=["lightning_port.py", *MAE_TINY],
            style="torchrun (env:// init, misc.init_distributed_mode) with a seed per rank (seed + rank); per-sample "
            "random masking drawn inside the model's forward (torch.rand noise, argsort); the lr set by hand every "
            "accumulation cycle from a half-cycle cosine with warmup (lr_sched.adjust_learning_rate); the lr from "
            "--blr x total batch / 256; accumulation by --accum_iter without no_sync (DDP reduces every "
            "micro-batch) through a GradScaler disabled on CPU; timm's add_weight_decay param groups; "
            "find_unused_parameters; the loss all_reduce'd every iteration for logging; checkpoints by epoch",
            source="facebookresearch/mae main_pretrain.py, engine_pretrain.py, models_mae.py, util/misc.py, "
            "util/lr_sched.py, util/pos_embed.py (CC-BY-NC 4.0, efb2a80); torchvision, ImageNet, timm 0.3.2 and "
            "tensorboard stood in for (standins.py), a 2-block MAE of 32 dims",
            recording="hooks",
            suite=False,
        ),
        Program(
            name="improved_diffusion",
            folder="improved_diffusion",
            raw=["image_train.py", *IMPROVED_DIFFUSION_TINY],
            port=["lightning_port.py", *IMPROVED_DIFFUSION_TINY],
            style="ranks from MPI in the original (torchrun's env:// here); the image list sharded by rank by the "
            "data set itself (no DistributedSampler), a shuffled DataLoader looped forever; micro-batches in each "
            "batch with DDP's no_sync on all but the last (the micro-batch losses summed, not averaged); two EMAs "
            "kept as lists of tensors; the lr annealed by hand before each step; timesteps drawn from numpy's "
            "generator (UniformSampler); checkpoints (model, each EMA, optimizer) at step 0 and every "
            "--save_interval steps and at the end",
            source="openai/improved-diffusion scripts/image_train.py, improved_diffusion/ (MIT, 1bc7bbb); blobfile, "
            "mpi4py and the image set stood in for (improved_diffusion/standins.py, torch.distributed)",
            prepare=lambda work: write_images(str(work / "data")),
            recording="hooks",
            suite=False,
        ),
        Program(
            name="swav",
            folder="swav",
            raw=["main_swav.py", *SWAV_TINY],
            port=["lightning_port.py", *SWAV_TINY],
            style="torchrun (env:// init, init_distributed_mode), one seed for every rank; multi-crop views (2 of 24 "
            "px + 2 of 16 px) drawn in the data set from torch's, numpy's and Python's generators, forwarded by "
            "resolution; the prototypes normalized by hand under no_grad before every forward (a parameter changed "
            "outside the optimizer); the prototypes' gradients set to None for the first freeze_prototypes_niters "
            "iterations; a queue of embeddings from epoch_queue_starts, saved per rank; Sinkhorn-Knopp with "
            "all_reduce inside the loss; the lr set by hand every iteration from a warmup + cosine array; LARC "
            "(apex) around SGD; SyncBatchNorm; a checkpoint each epoch on rank 0",
            source="facebookresearch/swav main_swav.py, src/utils.py, src/multicropdataset.py, src/resnet50.py, "
            "src/logger.py (CC-BY-NC 4.0, 06b1b7c); apex, torchvision, pandas, ImageNet and SyncBatchNorm on a CPU "
            "stood in for (standins.py), a 1-1-1-1 Bottleneck ResNet 16 wide",
            prepare=lambda work: write_swav_images(str(work)),
            recording="hooks",
            suite=False,
            ignore_config=("dump_path",),
        ),
        Program(
            name="detr",
            folder="detr",
            raw=["main.py", *DETR_TINY],
            port=["lightning_port.py", *DETR_TINY],
            style="env:// init under torchrun (utils.init_distributed_mode) with a seed per rank (seed + rank); AdamW "
            "over two param groups (the backbone at lr_backbone, its stem and layer1 frozen: requires_grad off, "
            "FrozenBatchNorm2d buffers); clip_grad_norm_ over model.parameters() at clip_max_norm; StepLR stepped per "
            "epoch (lr_drop); BatchSampler(DistributedSampler, drop_last=True) with a collate_fn padding images into a "
            "NestedTensor with a mask; transforms drawing from Python's random and torch's generator; a Hungarian "
            "matcher; auxiliary decoder losses weighted by a dict; num_boxes all_reduced inside the loss; the loss "
            "dict all_reduced for logging (reduce_dict); an evaluation pass and a checkpoint (rank 0) each epoch",
            source="facebookresearch/detr main.py, engine.py, models/, util/misc.py, util/box_ops.py, datasets/ "
            "(Apache-2.0, 29901c5); torchvision, scipy's linear_sum_assignment, pycocotools and COCO stood in for "
            "(standins.py), the COCO evaluation trimmed",
            recording="hooks",
            suite=False,
        ),
        Program(
            name="hifigan",
            folder="hifigan",
            raw=["train.py", *HIFIGAN_TINY],
            port=["lightning_port.py", *HIFIGAN_TINY],
            style="a GAN: a generator and two discriminators (MPD, MSD), each in its own DDP wrapper; two AdamW "
            "optimizers (generator; both discriminators chained), the discriminators stepped first on the detached "
            "generator output, then the generator; two ExponentialLR schedulers stepped per epoch; ranks by "
            "torch.multiprocessing.spawn (init from the config's dist_config, env:// here); DistributedSampler + "
            "set_epoch with random crops drawn from Python's generator in the data set; weight_norm/spectral_norm "
            "layers; a validation on rank 0 at step 0; checkpoints (generator; discriminators + both optimizers) "
            "every --checkpoint_interval steps on rank 0",
            source="jik876/hifi-gan train.py, models.py, meldataset.py, utils.py, env.py (MIT, 4769534); librosa, "
            "scipy.io.wavfile, tensorboard and LJSpeech stood in for (standins.py), the discriminators narrowed",
            prepare=lambda work: write_wavs(str(work / "data")),
            recording="hooks",
            raw_launch="python",
            suite=False,
        ),
        Program(
            name="edm",
            folder="edm",
            raw=["train.py", *EDM_TINY],
            port=["lightning_port.py", *EDM_TINY],
            style="torchrun (env:// init) with each rank seeded differently (np.random.seed(seed * world + rank), then "
            "torch.manual_seed(np.random.randint(...))); its own misc.InfiniteSampler (a windowed shuffle looping "
            "forever, split by idx % world) read by one DataLoader worker; gradient accumulation over batch_gpu "
            "micro-batches through misc.ddp_sync (DDP's no_sync on all but the last), each backward of "
            "loss.sum() * loss_scaling / batch_gpu_total; the lr set by hand before each step (a ramp-up on images "
            "seen, 0 at the first step); torch.nan_to_num on every .grad before Adam's step; an EMA copy lerped after "
            "each step (half-life ramped on images seen); the noise level and the noise drawn with torch.randn inside "
            "the loss; dropout; a module summary forward on rank 0 only before training; training_stats all-reduced "
            "every tick; snapshots pickling the EMA (check_ddp_consistency broadcasts) and training-state-*.pt (net + "
            "optimizer state) on rank 0",
            source="NVlabs/edm train.py, training/training_loop.py, loss.py, networks.py, dataset.py, torch_utils/"
            "distributed.py, misc.py, persistence.py, training_stats.py, dnnlib/ (CC BY-NC-SA 4.0, 008a4e5); click, "
            "psutil, requests and the image set stood in for (standins.py: argparse, 32 images of 8 x 8 drawn from a "
            "fixed seed), a SongUNet (DDPM++) of 16 channels at two resolutions",
            recording="hooks",
            suite=False,
        ),
        Program(
            name="lora",
            folder="lora",
            raw=["gpt2_ft.py", *LORA_TINY],
            port=["lightning_port.py", *LORA_TINY],
            style="torchrun (env:// init, --platform local) with one seed for every rank; a GPT-2 of its own with LoRA "
            "layers (MergedLinear on q and v, lora dropout) and lora.mark_only_lora_as_trainable (every other "
            "parameter frozen, tied embeddings); its own AdamW (correct_bias, decoupled weight decay after the "
            "update) over all parameters, the frozen ones skipped for lack of a gradient; a linear warmup/decay "
            "LambdaLR stepped every micro-batch; accumulation by hand (--grad_acc: backward every micro-batch with no "
            "no_sync, the step when train_step % grad_acc == 0); clip_grad_norm_ over model.parameters(); label "
            "smoothing in the loss; DistributedSampler(seed=random_seed) with set_epoch(epoch), the epoch counted "
            "from 1; a data set padding its last batch with items drawn from its own random.Random(911); evaluation "
            "every --eval_interval micro-batches then model.train(); lora_state_dict checkpoints every "
            "--save_interval micro-batches and a full state_dict at the end of every epoch, on rank 0 behind a "
            "barrier",
            source="microsoft/LoRA examples/NLG/src/gpt2_ft.py, gpu.py, model.py, optimizer.py, data_utils.py, "
            "exp_utils.py and loralib/ (MIT, c4593f0); the E2E data stood in for by token ids drawn from a fixed seed "
            "(prepare.py), a tiny GPT-2 card (2 layers of 32, a 64-token vocabulary), no pretrained checkpoint",
            prepare=lambda work: prepare_lora(str(work)),
            recording="hooks",
            suite=False,
            ignore_config=("work_dir",),
        ),
        Program(
            name="kair",
            folder="kair",
            raw=["main_train_psnr.py", *KAIR_TINY],
            port=["lightning_port.py", *KAIR_TINY],
            style="options from a JSON file with // comments (utils_option.parse); torchrun, init_dist('pytorch'); "
            "DistributedSampler(shuffle, drop_last=True, seed=seed) with set_epoch(epoch + seed); the scheduler "
            "stepped with the iteration (MultiStepLR.step(current_step), its closed form) BEFORE each "
            "optimize_parameters; clip_grad_norm_; the orthogonal (SVD) and clip regularizers applied to the "
            "weights after optimizer.step() every k iterations, outside the optimizer, skipped at checkpoint "
            "iterations; an EMA network netE outside DDP; random crops and flips drawn from Python's random and "
            "the noise from torch's generator in the data set; BatchNorm (DnCNN 'BR'); G, E and optimizer "
            "checkpoints on rank 0",
            source="cszn/KAIR main_train_psnr.py, options/train_dncnn.json, models/ (model_plain, model_base, "
            "select_network, network_dncnn, basicblock, loss), data/dataset_dncnn.py, utils/ (MIT, fc1732f); OpenCV, "
            "torchvision and BSD400 stood in for (standins.py), a DnCNN of 8 channels and 3 layers",
            prepare=lambda work: write_kair_images(str(work / "data")),
            recording="hooks",
            suite=False,
        ),
        Program(
            name="deit",
            folder="deit",
            raw=["main.py", *DEIT_TINY],
            port=["lightning_port.py", *DEIT_TINY],
            style="torchrun (env:// init, utils.init_distributed_mode) with a seed per rank (seed + rank, torch and "
            "numpy) set before the model is built, so each rank's EMA starts from its own init; RASampler (repeated "
            "augmentation: each sample 3 times across ranks, set_epoch); Mixup/CutMix per batch drawn from numpy's "
            "generator, soft targets; drop path drawn in forward; the lr scaled by batch x world / 512 before timm's "
            "AdamW (no weight decay on 1-D params and pos_embed/cls_token); timm's cosine scheduler with warmup "
            "stepped per epoch by lr_scheduler.step(epoch) after the epoch; NativeScaler doing backward, unscale, "
            "clip_grad_norm_ over model.parameters() and the step; ModelEma updated after every step; evaluation "
            "of the whole val set on every rank each epoch (MetricLogger all-reduces); save_on_master checkpoints",
            source="facebookresearch/deit main.py, engine.py, samplers.py, losses.py, utils.py, models.py, datasets.py "
            "(Apache-2.0, 7e160fe); timm 0.3.2, torchvision and ImageNet stood in for (standins.py), a 2-block ViT "
            "of 32 dims on 16 x 16 images",
            recording="hooks",
            suite=False,
            ignore_config=("output_dir",),
        ),
        Program(
            name="stylegan2",
            folder="stylegan2",
            raw=["train.py", *STYLEGAN2_TINY],
            port=["lightning_port.py", *STYLEGAN2_TINY],
            style="a GAN: a generator and a discriminator, each in its own DDP wrapper (broadcast_buffers=False), two "
            "Adam optimizers stepped alternately every iteration with requires_grad toggled per phase; lazy "
            "regularization (R1 on the discriminator every d_reg_every iterations, path length on the generator every "
            "g_reg_every, each a second step of its optimizer; lr and betas scaled by the reg ratio at construction); "
            "an EMA generator g_ema accumulated after each iteration; style-mixing noise drawn from torch.randn and "
            "Python's random every iteration, noise injection drawn in forward; reduce_loss_dict (a dist.reduce of "
            "the losses for logging); an endless sample_data loop over a DistributedSampler (shuffle, never "
            "set_epoch); a g_ema sample (rank 0, drawing noise) and a checkpoint (g, d, g_ema, both optimizers) on "
            "rank 0 at iteration 0",
            source="rosinality/stylegan2-pytorch train.py, model.py, distributed.py, dataset.py, non_leaking.py, op/ "
            "(MIT, op/ also NVIDIA's license; bef283a); torchvision, lmdb and the image set stood in for (standins.py: "
            "8 RGB images of 8 x 8 drawn from a fixed seed), the CUDA ops by their own CPU paths, channels 16 wide",
            recording="hooks",
            suite=False,
            ignore_config=("work_dir",),
        ),
        Program(
            name="mocov3",
            folder="mocov3",
            raw=["main_moco.py", *MOCOV3_TINY, *MOCOV3_SPAWN],
            port=["lightning_port.py", *MOCOV3_TINY],
            style="ranks by torch.multiprocessing.spawn, the seed set in the parent before spawn; its own LARS (no "
            "adaptation or weight decay on 1-D params, a step without closure); the lr set by hand every iteration "
            "(warmup + cosine on epoch + i / iters_per_epoch); the momentum encoder's coefficient on a cosine "
            "schedule per iteration, updated inside forward under no_grad; a symmetrized contrastive loss over keys "
            "gathered by concat_all_gather inside forward; the global batch divided by the world size; "
            "GradScaler/autocast (disabled on CPU); DistributedSampler + set_epoch; a checkpoint (model, optimizer, "
            "scaler) every epoch on rank 0",
            source="facebookresearch/moco-v3 main_moco.py, moco/builder.py, moco/loader.py, moco/optimizer.py "
            "(CC-BY-NC 4.0, c349e6e); torchvision, tensorboard and ImageNet stood in for (standins.py), a ResNet of "
            "one Bottleneck a stage (widths 4-8-16-32), no SyncBatchNorm on CPU",
            recording="hooks",
            raw_launch="python",
            suite=False,
        ),
        Program(
            name="tacotron2",
            folder="tacotron2",
            raw=["multiproc.py", TACOTRON2_TRAIN, *tacotron2_TINY],
            port=["lightning_port.py", *tacotron2_TINY],
            style="no torch DDP: its own apply_gradient_allreduce (the state broadcast from rank 0 at the wrap, applied"
            " twice; gradient hooks queue an autograd-engine callback that all-reduces the flattened gradients "
            "and divides by the world size; buffers never synced); its own launcher multiproc.py (train.py "
            "--rank=i subprocesses, a tcp:// init); the lr set by hand every iteration; clip_grad_norm_; "
            "model.zero_grad(); a DistributedSampler whose set_epoch is never called; a DataLoader with one "
            "worker; the decoder prenet's dropout always on (also in eval); validation every iters_per_checkpoint"
            " iterations from iteration 0 (its own DistributedSampler, reduce_tensor) and a checkpoint on rank 0 "
            "after it",
            source="NVIDIA/tacotron2 train.py, distributed.py, multiproc.py, model.py, layers.py, loss_function.py, "
            "data_utils.py, hparams.py, utils.py, stft.py, audio_processing.py, logger.py, plotting_utils.py, text/ "
            "(BSD-3-Clause; text/ MIT, 185cd24); tensorflow's HParams, librosa, scipy, tensorboard, unidecode, "
            "inflect and LJSpeech stood in for (standins.py: 12 short wavs drawn from a fixed seed)",
            prepare=lambda work: write_tacotron2_data(str(work / "data")),
            recording="hooks",
            raw_launch="python",
            suite=False,
        ),
        Program(
            name="vits",
            folder="vits",
            raw=["train.py", *VITS_TINY],
            port=["lightning_port.py", *VITS_TINY],
            style="a conditional VAE + GAN for speech: a generator (SynthesizerTrn) and a discriminator "
            "(MultiPeriodDiscriminator), each in its own DDP wrapper; two AdamW optimizers stepped in turn every "
            "iteration (the discriminator first, on the detached generator output; then the generator, whose loss "
            "backpropagates through the discriminator again); two ExponentialLR schedulers stepped per epoch; "
            "autocast + GradScaler (fp16_run, off on CPU); commons.clip_grad_value_(params, None) (a norm measured, "
            "nothing clipped); its own DistributedBucketSampler (batches bucketed by length, its own shuffle seeded "
            "by the epoch, set_epoch from epoch 1) as the DataLoader's batch_sampler; random slices of each "
            "utterance (rand_slice_segments), noise and dropout drawn from torch's generator every step; one "
            "torch.manual_seed for every rank after init; monotonic alignment search in numpy; ranks by "
            "torch.multiprocessing.spawn (MASTER_ADDR/MASTER_PORT, env://); on rank 0 every eval_interval steps "
            "(step 0 here) an inference pass (drawing noise) and G_*/D_* checkpoints; a resume from the latest "
            "checkpoint in the model directory",
            source="jaywalnut310/vits train.py, models.py, modules.py, attentions.py, commons.py, losses.py, "
            "mel_processing.py, data_utils.py, utils.py, transforms.py, monotonic_align/, text/ (MIT, 2e561ba); "
            "librosa, scipy, tensorboard, matplotlib, the Cython monotonic_align.core and LJSpeech stood in for "
            "(standins.py: 18 short wavs drawn from a fixed seed), a model of 16 channels, the discriminators "
            "narrowed",
            prepare=lambda work: write_vits_wavs(str(work / "data")),
            recording="hooks",
            raw_launch="python",
            suite=False,
        ),
        Program(
            name="slip",
            folder="slip",
            raw=["main.py", *SLIP_TINY],
            port=["lightning_port.py", *SLIP_TINY],
            style="torchrun (env:// init, utils.init_distributed_mode) with a seed per rank (seed + rank, torch "
            "and numpy); a CLIP loss over features all_gathered without gradient plus SimCLR's over two "
            "augmented views gathered WITH their gradients (GatherLayer, an autograd Function around "
            "all_gather whose backward all_reduces); the logit_scale parameter clamped in place after every "
            "step; the lr set by hand every iteration from a warmup + cosine array; gradient accumulation by"
            " --update-freq (the loss divided, no no_sync); AdamW over two param groups split by name and "
            "ndim; GradScaler (off on CPU); DDP with bucket_cap_mb=200; SyncBatchNorm in the SimCLR head; "
            "captions drawn by numpy, augmentations by torch's and Python's generators; zero-shot validation"
            " and a checkpoint (model, optimizer, scaler) every epoch",
            source="facebookresearch/SLIP main.py, models.py, losses.py, utils.py, datasets.py (MIT, c6faf5d); "
            "timm, torchvision, the BPE tokenizer (ftfy, regex), wandb, CC3M/ImageNet and SyncBatchNorm on "
            "CPU stood in for (standins.py), a SLIP of a 2-block ViT of 32 dims and a 1-layer text "
            "transformer",
            prepare=lambda work: write_slip_data(str(work / "data")),
            recording="hooks",
            suite=False,
            ignore_config=("output_dir",),
        ),
        Program(
            name="fixmatch",
            folder="fixmatch",
            raw=["train.py", *FIXMATCH_TINY],
            port=["lightning_port.py", *FIXMATCH_TINY],
            style="semi-supervised: a labeled and an unlabeled DataLoader, each with its own DistributedSampler, "
            "their iterators re-created on StopIteration with epoch counters of their own for set_epoch; the "
            "labeled, weak and strong batches interleaved into one forward and de-interleaved; pseudo-labels "
            "thresholded from the weak view; RandAugment drawing from Python's random and numpy, flips and crops "
            "from torch's; one seed for every rank (random, numpy, torch); rank 0 builds the data sets first "
            "(barriers), x_u_split drawing from numpy; DDP with find_unused_parameters; SGD nesterov over two groups "
            "(no weight decay on bias/bn); a cosine LambdaLR with warmup stepped every step; an EMA model updated "
            "every step (buffers copied); on rank 0 after each --eval-step steps, the EMA model evaluated and a "
            "checkpoint saved",
            source="kekmodel/FixMatch-pytorch train.py, dataset/cifar.py, dataset/randaugment.py, "
            "models/wideresnet.py, models/ema.py, utils/ (MIT, 040be3b); torchvision, tensorboard and CIFAR-10 stood "
            "in for (standins.py: 48 + 10 synthetic 32 x 32 images), a WideResNet 10x1",
            prepare=lambda work: write_fixmatch_data(str(work / "data")),
            recording="hooks",
            suite=False,
            ignore_config=("out",),
        ),
        Program(
            name="vqvae2",
            folder="vqvae2",
            raw=["train_vqvae.py", *VQVAE2_TINY],
            port=["lightning_port.py", *VQVAE2_TINY],
            style="ranks by its own launch (torch.multiprocessing.spawn, a tcp:// or env:// init); VQ-VAE-2 whose two "
            "codebooks are buffers updated in the TRAINING forward by an exponential moving average under no_grad, "
            "the cluster counts and sums all_reduced there by its own helper; a latent (commitment) loss beside the "
            "reconstruction loss; Adam with its own CycleScheduler (not a torch LRScheduler: linear warmup then "
            "cosine) stepped every iteration before optimizer.step; model.zero_grad(); a DistributedSampler whose "
            "set_epoch is never called; a DataLoader with 2 workers; the mse all_gathered as pickled dicts every "
            "step; a sample reconstruction (eval mode) and a checkpoint every epoch on rank 0",
            source="rosinality/vq-vae-2-pytorch train_vqvae.py, vqvae.py, scheduler.py, distributed/ (MIT, ef5f67c); "
            "torchvision (ImageFolder, transforms, save_image) and the image set stood in for (standins.py: 80 RGB "
            "images of 20 x 18 drawn from a fixed seed), a VQVAE of 16 channels, 32 codes of 8 dims",
            prepare=lambda work: write_vqvae2_data(str(work)),
            recording="hooks",
            raw_launch="python",
            suite=False,
        ),
        Program(
            name="pycls",
            folder="pycls",
            raw=["run_net.py", *PYCLS_TINY],
            port=["lightning_port.py", *PYCLS_TINY],
            style="a yacs config (a YAML file and KEY VALUE overrides); its own launcher (distributed.multi_proc_run: "
            "torch.multiprocessing.start_processes with fork, env:// init); the seeds (numpy, torch, random) set alike "
            "on every rank before the model is built; a DistributedSampler + set_epoch through loader.shuffle; the lr "
            "set by hand once an epoch (a linear warmup factor, then cos); SGD with nesterov momentum over param "
            "groups split by name (bn, ln, bias, the rest); label smoothing (smoothed one-hot targets, a soft cross "
            "entropy); "
            "mixup drawn from numpy and torch.randperm every iteration; an EMA copy of the model (outside DDP) updated "
            "every EMA_UPDATE_PERIOD iterations from the state_dict (buffers too), copied during warmup; precise BN "
            "after each epoch (forwards over training batches with momentum 1, the stats all-reduced, for the model "
            "and the EMA); CIFAR augmentation (flip, pad, crop) drawn from numpy in __getitem__; test of the model and "
            "the EMA and a checkpoint (model, ema, optimizer) on the master process every epoch",
            source="facebookresearch/pycls tools/run_net.py, pycls/core/{trainer,config,distributed,builders,optimizer,"
            "net,checkpoint,meters,io,logging,benchmark,timer}.py, pycls/datasets/{loader,cifar10}.py, pycls/models/ "
            "(MIT, 5719de6); yacs, iopath, simplejson, submitit, fairscale and CIFAR-10 stood in for (standins.py: 64 "
            "+ 32 images drawn from a fixed seed), the CIFAR ResNet of depth 8",
            prepare=lambda work: write_pycls_data(str(work / "data")),
            recording="hooks",
            raw_launch="python",
            suite=False,
            ignore_config=("OUT_DIR",),
        ),
        Program(
            name="vitft",
            folder="vitft",
            raw=["train.py", *VITFT_TINY],
            port=["lightning_port.py", *VITFT_TINY],
            style="torch.distributed.launch (--local_rank; LOCAL_RANK under torchrun); apex DDP (torch's here); "
            "training counted in optimizer steps over a while-True loop of epochs; gradient accumulation by "
            "(step + 1) % n within each epoch (the loss divided, backward every micro-batch without no_sync, no "
            "zero_grad at an epoch's end: a micro-batch left over joins the next epoch's first step); "
            "clip_grad_norm_, then scheduler.step() BEFORE optimizer.step() (a warmup + cosine LambdaLR); SGD "
            "momentum; set_seed (random, numpy, torch) before the model and again before the loop; a "
            "DistributedSampler whose set_epoch is never called; DataLoaders with 4 workers; RandomResizedCrop "
            "drawn from torch's generator in the workers; dropout; validation every eval_every steps on rank 0 "
            "only (a SequentialSampler loader there), the best accuracy's weights saved there",
            source="jeonsworld/ViT-pytorch train.py, models/{modeling,modeling_resnet,configs}.py, "
            "utils/{scheduler,data_utils,dist_util}.py (MIT, 460a162); torchvision, apex, tensorboard, "
            "ml_collections, scipy and CIFAR-10 stood in for (standins.py: 40 + 16 synthetic 32 x 32 images), "
            "a ViT of patch 8, 32 dims, 2 layers, 2 heads",
            prepare=lambda work: write_vitft_data(str(work / "data")),
            recording="hooks",
            suite=False,
            ignore_config=("output_dir",),
        ),
        Program(
            name="basicsr",
            folder="basicsr",
            raw=["train.py", *BASICSR_TINY],
            port=["lightning_port.py", *BASICSR_TINY],
            style="super-resolution driven by a YAML option file (--force_yml overrides); torchrun, "
            "init_dist('pytorch'); "
            "set_random_seed(seed + rank) (random, numpy, torch) before the data and the model are built; its own "
            "EnlargedSampler (the data set enlarged by a ratio, a torch.randperm seeded by the epoch alone, set_epoch "
            "each epoch); a CPUPrefetcher around the DataLoader (an iterator made at construction and again by reset() "
            "every epoch, a while loop on next()); training counted in iterations (total_iter) across epochs, the "
            "last epoch's first batch drawn then dropped; random crops and flips drawn from Python's random in the "
            "data set; CosineAnnealingRestartLR stepped before every iteration from the second by "
            "update_learning_rate, "
            "with a linear warm-up set by hand over the first warmup_iter - 1 iterations; Adam; an EMA of net_g "
            "(built by a second build_network, then copied) updated after every step; reduce_loss_dict (a dist.reduce "
            "of the losses every step); validation of the EMA (PSNR) on rank 0 every val_freq iterations and at the "
            "end; net_g/net_g_ema and training_states (optimizer, scheduler) saved by rank 0 every "
            "save_checkpoint_freq iterations",
            source="XPixelGroup/BasicSR basicsr/train.py and basicsr/{data,models,archs,losses,metrics,utils}/ (what "
            "SRModel, MSRResNet and PairedImageDataset import; Apache-2.0, 8d56e3a); OpenCV, torchvision, scipy, "
            "basicsr.ops and DIV2K/Set5 stood in for (standins.py: 8 + 2 synthetic RGB pairs 24 x 24 / 12 x 12 drawn "
            "from a fixed seed), an MSRResNet x2 of 8 features and 2 blocks",
            prepare=lambda work: write_basicsr_data(str(work / "data")),
            recording="hooks",
            suite=False,
            ignore_config=("experiments_root",),
        ),
        Program(
            name="var",
            folder="var",
            raw=["train.py", *VAR_TINY],
            port=["lightning_port.py", *VAR_TINY],
            style="its own dist.py (init from torchrun's environment) and print override; a per-rank seed (seed * "
            "world_size + rank) for random, numpy and torch; an infinite DistInfiniteBatchSampler (its own shard by "
            "rank, a randperm seeded with the epoch, the last batch filled) iterated by ONE iterator across epochs, "
            "no DistributedSampler; random crops from torch's global generator; a frozen VQ-VAE (loaded from a "
            "checkpoint, requires_grad False) tokenizing each batch into multi-scale indices; a VAR transformer whose"
            " forward draws a class-dropout mask and drop-path from the global generator; lr and weight decay set by "
            "hand every iteration (lr_wd_annealing: warmup then a linear schedule, wd by cosine, per-group "
            "lr_sc/wd_sc); AdamW (fused) over two groups (no wd on 1-d, bias and named embeddings) inside an "
            "AmpOptimizer (fp32 here, grad clipping by clip_grad_norm_ over its parameter list, "
            "zero_grad(set_to_none)); progressive training (the last scale grows from pg0, its loss weight ramped "
            "over pgwp); label smoothing; DDP with find_unused_parameters=False, broadcast_buffers=False; evaluation "
            "on a val loader on every rank (an all_reduce) at the last epoch, and ar-ckpt-last.pth on the local "
            "master; auto-resume",
            source="FoundationVision/VAR train.py, trainer.py, dist.py, utils/{arg_util,data,data_sampler,lr_control,"
            "amp_sc,misc}.py, models/ (MIT, 78b9539); typed-argument-parser, pytz, tensorboard, huggingface_hub, "
            "torchvision and ImageNet stood in for (standins.py: 20 + 8 images of 64 x 64 from a fixed seed), the "
            "VQ-VAE checkpoint a random-init one written by prepare, a VAR of depth 2",
            prepare=lambda work: write_var_data(str(work)),
            recording="hooks",
            suite=False,
            ignore_config=("local_out_dir_path",),
        ),
        Program(
            name="openclip",
            folder="openclip",
            raw=["main.py", *OPENCLIP_TINY],
            port=["lightning_port.py", *OPENCLIP_TINY],
            style="torchrun (env:// init, init_distributed_device); seed + 0 for the model build on every rank, then "
            "seed + rank (torch, numpy, random) for the data; a CSV data set under a DistributedSampler set_epoch'd "
            "through its DataInfo; random resized crops from torch's global generator; a contrastive ClipLoss over "
            "image and text features all_gathered from every rank (no gradient through the others'); --accum-freq: "
            "the features of every micro-batch first computed without grad and cached, then each micro-batch re-run "
            "with grad against the cached others (a backward each, no no_sync), one AdamW step; the lr assigned by "
            "hand to every param group before each micro-batch (cosine_lr with warm-up); two param groups (no weight "
            "decay on gains, biases and logit_scale); logit_scale clamped in place under no_grad after each step; "
            "evaluation (val loss, retrieval ranks) on rank 0 only after each epoch; epoch_N.pt (state_dict, "
            "optimizer) by rank 0",
            source="mlfoundations/open_clip src/training/{main,train,data,params,scheduler,distributed,precision,"
            "logger,file_utils,zero_shot}.py and src/open_clip/ (MIT, v2.20.0 a09d519); torchvision, ftfy, regex, "
            "pandas, webdataset and braceexpand stood in for (standins.py), a CLIP of a 2-block ViT of width 32 on 16 "
            "x 16 images and a 1-layer text transformer of width 32",
            prepare=lambda work: write_openclip_data(str(work / "data")),
            recording="hooks",
            suite=False,
            ignore_config=("name",),
        ),
        Program(
            name="muon",
            folder="muon",
            raw=["train_gpt2.py"],
            port=["lightning_port.py"],
            style="modded-nanogpt's speedrun script: torchrun (env ranks), its own Hyperparameters dataclass (no CLI); "
            "its own DistributedDataLoader over token shards (header + uint16 tokens, each rank at its own offset, no "
            "sampler, the first batch drawn before reset() and trained on again); three optimizers: Adam (fused) for "
            "the embedding, Adam for the head, Muon for the blocks' matrices (Nesterov momentum, Newton-Schulz "
            "orthogonalization in bfloat16, the parameters split between ranks by RANK/WORLD_SIZE and the updates "
            "all_reduced inside Muon.step); a trapezoidal get_lr through one LambdaLR an optimizer; accumulation by "
            "no_sync on the non-final micro-batches, the grads divided by hand after; bf16 autocast; val loss every "
            "val_loss_every steps and at step 0 and the end, all_reduced (AVG); state_stepN.pt by rank 0 at the end",
            source="KellerJordan/modded-nanogpt train_gpt2.py (MIT, fdc6e0b7 of 2024-10-30, F.scaled_dot_product_"
            "attention, DDP); torch.compile off on CPU; a GPT of 2 layers x 32 wide (4 heads), vocab 64, seq 16; 8 "
            "steps of 2 ranks x 2 sequences x 2 accumulation steps over 2 train shards of 300 tokens (prepare)",
            prepare=lambda work: write_muon_data(str(work)),
            recording="hooks",
            suite=False,
        ),
        Program(
            name="timm",
            folder="timm",
            raw=["train.py", *TIMM_TINY],
            port=["lightning_port.py", *TIMM_TINY],
            style="image classification by timm's train.py: init_distributed_device (torchrun's env, gloo for cpu); "
            "random_seed(seed, rank) (torch, numpy, random seeded seed + rank) before the model is built, so each rank "
            "builds its own init and its own EMA copy (DDP broadcasts rank 0's weights, not the EMA's); timm's "
            "create_dataset/create_loader (an image folder, torch's DistributedSampler, persistent workers seeded "
            "per worker, RandomResizedCrop with a random interpolation from Python's random, flips from torch's); "
            "Mixup/CutMix drawn from numpy on each rank with label smoothing (SoftTargetCrossEntropy); gradient "
            "accumulation by hand (no_sync on non-final micro-batches, the loss divided by the steps of its own "
            "accumulation: the lone last micro-batch of an epoch undivided); clip_grad_norm_ over the model's "
            "parameters; AdamW from create_optimizer_v2 (no weight decay on 1-d parameters); a cosine scheduler "
            "stepped per update (step_update(num_updates)) and per epoch (step(epoch + 1, metric)); ModelEmaV3 "
            "updated after every optimizer step; distribute_bn (BatchNorm running stats all-reduced) at each epoch's "
            "end for the model and the EMA before each is validated on every rank (reduce_tensor); CheckpointSaver "
            "(checkpoint-N, last, model_best by the EMA's top-1) on rank 0",
            source="huggingface/pytorch-image-models train.py and the timm modules it imports (Apache-2.0, v1.0.14 "
            "5d535d7); torchvision stood in for (standins.py: transforms, FrozenBatchNorm2d), 24 + 8 images of 16 x 16 "
            "written by prepare, resnet10t narrowed to channels (8, 8, 16, 16)",
            prepare=lambda work: write_timm_data(str(work)),
            recording="hooks",
            suite=False,
            ignore_config=("output",),
        ),
        Program(
            name="llmc",
            folder="llmc",
            raw=["train_gpt2.py", *LLMC_TINY],
            port=["lightning_port.py", *LLMC_TINY],
            style="llm.c's reference GPT-2 trainer: torchrun (env ranks), argparse; its own DistributedDataLoader over "
            ".bin token shards (a 256-int32 header, uint16 tokens; each rank at rank * B * T, stepping B * T * "
            "world, the next shard when one runs out, cycling; no sampler, no randomness); weight tying (wte = "
            "lm_head) and an init from its own torch.Generator seeded 42; gradient accumulation through "
            "require_backward_grad_sync with the loss divided by the accumulation steps; the logged loss "
            "all_reduced (AVG); clip_grad_norm_ over model.parameters(); the lr set by hand on every group before"
            " each step (linear warmup, cosine decay to lr * decay_frac); AdamW (betas 0.9/0.95, fused off on "
            "CPU) in two weight-decay groups (dim >= 2 decayed) inside torch's ZeroRedundancyOptimizer "
            "(--zero_stage 1: the optimizer state sharded over the ranks, the no-decay group added by "
            "add_param_group); the val loss at step 0, every val_loss_every steps and after the last "
            "(val_loader.reset() each time, each rank its own mean, not reduced); no checkpoint",
            source="karpathy/llm.c train_gpt2.py (MIT, f1e2ace of 2025-05-10); tiktoken stood in for (standins.py); "
            "a tiny model d2 (2 layers, 2 heads, 32 wide, vocab 256, block 64), CPU, gloo; 2 train shards and 1 val "
            "shard written by prepare",
            prepare=lambda work: write_llmc_data(str(work)),
            recording="hooks",
            suite=False,
        ),
        Program(
            name="hrnet",
            folder="hrnet",
            raw=["tools/train.py", *HRNET_TINY],
            port=["lightning_port.py", *HRNET_TINY],
            style="semantic segmentation by a yacs config (YAML + command-line overrides); torch.distributed.launch's "
            "--local_rank (here LOCAL_RANK from torchrun's environment), env:// init; torch and Python's random seeded "
            "(numpy too, by the port: the flips); the loss computed INSIDE the module DDP wraps (FullModel(model, "
            "criterion) returning torch.unsqueeze(loss, 0) and the outputs), .mean() of it as the backward root, and "
            "that loss reduce_tensor'ed (an in-place dist.reduce to rank 0) for printing before backward; "
            "find_unused_parameters=True; SGD with nesterov over two param groups built from NONBACKBONE_KEYWORDS "
            "(x NONBACKBONE_MULT); the poly lr (base_lr * (1 - iter / max_iter) ** 0.9) set by hand on both groups "
            "AFTER every optimizer step; random scale (Python's random), pad and crop (Python's random) and flip "
            "(numpy's global generator) in the data set; OHEM cross-entropy with class weights and an ignore label; "
            "DistributedSampler (shuffle) with set_epoch, and one (shuffled, never set_epoch) for validation; "
            "validation every epoch with a confusion matrix reduced to rank 0; checkpoint.pth.tar on rank 0 every "
            "epoch (resume from it)",
            source="HRNet/HRNet-Semantic-Segmentation (branch HRNet-OCR, 0bbb288; MIT) tools/train.py, "
            "lib/core/{criterion,function}.py, lib/utils/{utils,distributed,modelsummary}.py, lib/config/, "
            "lib/datasets/{base_dataset,cityscapes}.py, lib/models/{seg_hrnet,bn_helper}.py; yacs, OpenCV and "
            "tensorboardX stood in for (standins.py), 12 + 4 synthetic 32 x 32 images and 4-class label maps written "
            "by prepare, an HRNet of widths 4/8/16/32 with one block a branch",
            prepare=prepare_hrnet,
            recording="hooks",
            suite=False,
        ),
        Program(
            name="swin",
            folder="swin",
            raw=["main.py", *SWIN_TINY],
            port=["lightning_port.py", *SWIN_TINY],
            style="a yacs config from a YAML file and command-line overrides; torchrun (env:// init); seed = SEED + "
            "rank (torch, numpy, random); the lr, warmup lr and min lr scaled by batch x world / 512 x "
            "accumulation steps; a DistributedSampler (set_epoch) for training and one without shuffle for "
            "validation; RandomCrop(16, padding 4) and flips drawn from torch's generator in the data set; "
            "Mixup/CutMix with label smoothing drawn from numpy's generator per batch, SoftTargetCrossEntropy; "
            "drop path drawn in forward; AdamW over two groups (no weight decay on 1-D, biases and the model's "
            "no_weight_decay keywords); gradient accumulation (the loss divided, backward through DDP every "
            "micro-batch without no_sync, the step at an accumulation boundary) by NativeScalerWithGradNormCount "
            "(unscale, clip_grad_norm_ over model.parameters(), step); timm's CosineLRScheduler with warmup "
            "stepped per update by step_update((epoch * num_steps + idx) // accumulation_steps); validation on "
            "every rank each epoch, accuracy all-reduced by reduce_tensor; ckpt_epoch_N.pth (model, optimizer, "
            "scheduler, scaler) on rank 0 each epoch; auto-resume",
            source="microsoft/Swin-Transformer main.py, config.py, lr_scheduler.py, optimizer.py, utils.py, logger.py, "
            "data/build.py, models/build.py, models/swin_transformer.py (MIT, f82860b); yacs, termcolor, timm "
            "0.4.12, torchvision and ImageNet stood in for (standins.py: 32 + 8 synthetic 16 x 16 images in 5 "
            "class folders), a Swin of patch 2, 16 dims, depths [1, 1], heads [1, 2], window 2",
            prepare=lambda work: write_swin_data(str(work / "data")),
            recording="hooks",
            suite=False,
            ignore_config=("output",),
        ),
        Program(
            name="ppo",
            folder="ppo",
            raw=["ppo_atari_multigpu.py", *PPO_TINY],
            port=["lightning_port.py", *PPO_TINY],
            style="PPO on vectorized envs, no DDP wrapper: after loss.backward() every rank flattens its gradients, "
            "all_reduces them (SUM) and divides by the world size by hand, then clip_grad_norm_ and Adam (eps 1e-5); "
            "the data are rollouts the policy produces (actions sampled from a Categorical under torch's global "
            "generator), GAE per rank, update epochs of minibatches shuffled by np.random.shuffle per rank, an early "
            "stop on the (per-rank) approximate KL; the lr annealed by hand per iteration; seeds seed + rank for "
            "python/numpy/env; torch seeded seed before the model (one init on every rank), seed + rank after it",
            source="vwxyzjn/cleanrl cleanrl/ppo_atari_multigpu.py (MIT, fe8d8a0); gymnasium/ALE, tyro and tensorboard "
            "stood in for (standins.py: a 4 x 16 x 16 uint8 vector env), the Agent's conv net shrunk for 16 x 16",
            recording="hooks",
            suite=False,
        ),
        Program(
            name="pyg_gin",
            folder="pyg_gin",
            raw=["distributed_batching.py"],
            port=["lightning_port.py"],
            style="ranks by torch.multiprocessing.spawn (MASTER_PORT from the environment); graphs collated by "
            "torch_geometric's DataLoader into a Batch (node features, a sparse adj_t with edge attributes, the batch "
            "vector) over a DistributedSampler (shuffle, drop_last; seed 0) with set_epoch(epoch) counted from 1; "
            "torch.manual_seed(12345) right before the model is built (after the data set and the loaders); GINEConv "
            "layers with BatchNorm (DDP's buffer broadcast) and F.dropout(0.5) drawn from torch's global generator; "
            "Atom/BondEncoder embeddings, global_mean_pool, BCEWithLogitsLoss; Adam; the epoch's loss summed x "
            "num_graphs and all_reduced (AVG) for printing; evaluation on rank 0 only, through model.module, of a "
            "validation and a test loader (each iteration of a DataLoader drawing its base seed from torch's global "
            "generator on rank 0 only) with ogb's ROC-AUC Evaluator; a barrier each epoch",
            source="pyg-team/pytorch_geometric examples/multi_gpu/distributed_batching.py (MIT, 5c6461b); "
            "torch_geometric, torch_sparse and ogb stood in for (standins.py: 320 synthetic molecule-like graphs "
            "generated from a fixed seed, ogbg-molhiv's one task), GIN of hidden 16",
            recording="hooks",
            suite=False,
            raw_launch="python",
        ),
        Program(
            name="annotated_transformer",
            folder="annotated_transformer",
            raw=["the_annotated_transformer.py"],
            port=["lightning_port.py"],
            style="ranks by its own launch (train_distributed_model: torch.multiprocessing.spawn, env://); an "
            "encoder-decoder Transformer with dropout, the generator (log_softmax) applied outside the DDP forward; "
            "sentences of different lengths padded by collate_batch, Batch masks; LabelSmoothing (KLDivLoss, sum) "
            "divided by the rank's own token count; accumulation by `i % accum_iter == 0` (a step at the first "
            "micro-batch of every epoch, the last micro-batch's gradient carried into the next epoch), the loss not "
            "divided by accum_iter; Adam with the Noam rate as a LambdaLR stepped every micro-batch; "
            "DistributedSamplers (both shuffled, both set_epoch) for training and validation; validation every "
            "epoch through DDP in eval mode without no_grad (DummyOptimizer/DummyScheduler); torch.save of the "
            "model on rank 0 every epoch and at the end",
            source="harvardnlp/annotated-transformer the_annotated_transformer.py, its training part (MIT, "
            "debc9fd); torchtext (Multi30k, vocab), spacy and GPUtil stood in for (standins.py: a synthetic "
            "German-English corpus of 48 + 16 sentence pairs of 3-10 words, a whitespace tokenizer), a Transformer of "
            "N=1, d_model 32, d_ff 64, 2 heads",
            recording="hooks",
            raw_launch="python",
            suite=False,
        ),
    ]
}
