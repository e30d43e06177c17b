"""hifi-gan's train.py as a LightningModule: the same arguments and config, the program's models, losses and data
set by import; the two optimizers stepped by hand (manual optimization, as the Lightning docs' GAN example),
the two ExponentialLR schedulers stepped at each epoch's end; DDP by Lightning's own launcher."""

import argparse
import itertools
import json
import os

import lightning as L
import torch
import torch.nn.functional as F
from env import AttrDict, build_env
from meldataset import MelDataset, get_dataset_filelist, mel_spectrogram
from models import (
    Generator,
    MultiPeriodDiscriminator,
    MultiScaleDiscriminator,
    discriminator_loss,
    feature_loss,
    generator_loss,
)
from torch.utils.data import DataLoader, DistributedSampler
from utils import save_checkpoint


class HifiGan(L.LightningModule):
    def __init__(self, a, h):
        super().__init__()
        self.a = a
        self.h = h
        self.automatic_optimization = False
        self.generator = Generator(h)
        self.mpd = MultiPeriodDiscriminator()
        self.msd = MultiScaleDiscriminator()
        self.steps = 0  # the program's own step count (one per batch), for its checkpoint schedule

    def configure_optimizers(self):
        h = self.h
        optim_g = torch.optim.AdamW(self.generator.parameters(), h.learning_rate, betas=[h.adam_b1, h.adam_b2])
        optim_d = torch.optim.AdamW(
            itertools.chain(self.msd.parameters(), self.mpd.parameters()),
            h.learning_rate,
            betas=[h.adam_b1, h.adam_b2],
        )
        scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=h.lr_decay)
        scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=h.lr_decay)
        return [optim_g, optim_d], [scheduler_g, scheduler_d]

    def train_dataloader(self):
        h, a = self.h, self.a
        training_filelist, _ = get_dataset_filelist(a)
        trainset = MelDataset(
            training_filelist,
            h.segment_size,
            h.n_fft,
            h.num_mels,
            h.hop_size,
            h.win_size,
            h.sampling_rate,
            h.fmin,
            h.fmax,
            n_cache_reuse=0,
            shuffle=False if h.num_gpus > 1 else True,
            fmax_loss=h.fmax_for_loss,
            device=self.device,
            fine_tuning=a.fine_tuning,
            base_mels_path=a.input_mels_dir,
        )
        # the program's own DistributedSampler (seed 0): Lightning's would be seeded from the global seed; Lightning
        # calls its set_epoch
        train_sampler = DistributedSampler(trainset) if h.num_gpus > 1 else None
        return DataLoader(
            trainset,
            num_workers=h.num_workers,
            shuffle=False,
            sampler=train_sampler,
            batch_size=h.batch_size,
            pin_memory=True,
            drop_last=True,
        )

    def validation_loader(self):
        h, a = self.h, self.a
        _, validation_filelist = get_dataset_filelist(a)
        validset = MelDataset(
            validation_filelist,
            h.segment_size,
            h.n_fft,
            h.num_mels,
            h.hop_size,
            h.win_size,
            h.sampling_rate,
            h.fmin,
            h.fmax,
            False,
            False,
            n_cache_reuse=0,
            fmax_loss=h.fmax_for_loss,
            device=self.device,
            fine_tuning=a.fine_tuning,
            base_mels_path=a.input_mels_dir,
        )
        return DataLoader(validset, num_workers=1, shuffle=False, batch_size=1, pin_memory=True, drop_last=True)

    def training_step(self, batch, batch_idx):
        h = self.h
        optim_g, optim_d = self.optimizers()
        x, y, _, y_mel = batch
        y = y.unsqueeze(1)

        y_g_hat = self.generator(x)
        y_g_hat_mel = mel_spectrogram(
            y_g_hat.squeeze(1), h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size, h.fmin, h.fmax_for_loss
        )

        # Discriminators
        optim_d.zero_grad()
        y_df_hat_r, y_df_hat_g, _, _ = self.mpd(y, y_g_hat.detach())
        loss_disc_f, _, _ = discriminator_loss(y_df_hat_r, y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, _, _ = self.msd(y, y_g_hat.detach())
        loss_disc_s, _, _ = discriminator_loss(y_ds_hat_r, y_ds_hat_g)
        loss_disc_all = loss_disc_s + loss_disc_f
        self.manual_backward(loss_disc_all)
        optim_d.step()

        # Generator
        optim_g.zero_grad()
        loss_mel = F.l1_loss(y_mel, y_g_hat_mel) * 45
        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = self.mpd(y, y_g_hat)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = self.msd(y, y_g_hat)
        loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
        loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_f, _ = generator_loss(y_df_hat_g)
        loss_gen_s, _ = generator_loss(y_ds_hat_g)
        loss_gen_all = loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f + loss_mel
        self.manual_backward(loss_gen_all)
        optim_g.step()

        with torch.no_grad():
            mel_error = F.l1_loss(y_mel, y_g_hat_mel)
        self.log_dict({"training/gen_loss_total": loss_gen_all, "training/mel_spec_error": mel_error}, prog_bar=True)

        # the program's checkpoints, on its schedule (Lightning's global_step counts both optimizers' steps)
        a, steps = self.a, self.steps
        if self.global_rank == 0 and steps % a.checkpoint_interval == 0 and steps != 0:
            save_checkpoint(f"{a.checkpoint_path}/g_{steps:08d}", {"generator": self.generator.state_dict()})
            save_checkpoint(
                f"{a.checkpoint_path}/do_{steps:08d}",
                {
                    "mpd": self.mpd.state_dict(),
                    "msd": self.msd.state_dict(),
                    "optim_g": optim_g.state_dict(),
                    "optim_d": optim_d.state_dict(),
                    "steps": steps,
                    "epoch": self.current_epoch,
                },
            )
        # the program's validation: on rank 0 only, inside the training loop, every validation_interval steps
        # (step 0 included)
        if self.global_rank == 0 and steps % a.validation_interval == 0:
            self.generator.eval()
            val_err_tot = 0
            with torch.no_grad():
                for j, batch in enumerate(self.validation_loader_):  # noqa: B007 (j counts the batches)
                    x, y, _, y_mel = batch
                    y_g_hat = self.generator(x)
                    y_g_hat_mel = mel_spectrogram(
                        y_g_hat.squeeze(1),
                        h.n_fft,
                        h.num_mels,
                        h.sampling_rate,
                        h.hop_size,
                        h.win_size,
                        h.fmin,
                        h.fmax_for_loss,
                    )
                    val_err_tot += F.l1_loss(y_mel, y_g_hat_mel).item()
                val_err = val_err_tot / (j + 1)
            self.log("validation/mel_spec_error", val_err, rank_zero_only=True)
            self.generator.train()
        self.steps += 1

    def on_train_epoch_end(self):
        scheduler_g, scheduler_d = self.lr_schedulers()
        scheduler_g.step()
        scheduler_d.step()

    def on_fit_start(self):
        if self.global_rank == 0:
            self.validation_loader_ = self.validation_loader()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--group_name", default=None)
    parser.add_argument("--input_wavs_dir", default="LJSpeech-1.1/wavs")
    parser.add_argument("--input_mels_dir", default="ft_dataset")
    parser.add_argument("--input_training_file", default="LJSpeech-1.1/training.txt")
    parser.add_argument("--input_validation_file", default="LJSpeech-1.1/validation.txt")
    parser.add_argument("--checkpoint_path", default="cp_hifigan")
    parser.add_argument("--config", default="")
    parser.add_argument("--training_epochs", default=3100, type=int)
    parser.add_argument("--stdout_interval", default=5, type=int)
    parser.add_argument("--checkpoint_interval", default=5000, type=int)
    parser.add_argument("--summary_interval", default=100, type=int)
    parser.add_argument("--validation_interval", default=1000, type=int)
    parser.add_argument("--fine_tuning", default=False, type=bool)
    a = parser.parse_args()

    with open(a.config) as f:
        h = AttrDict(json.loads(f.read()))
    build_env(a.config, "config.json", a.checkpoint_path)

    L.seed_everything(h.seed)
    model = HifiGan(a, h)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=h.num_gpus,
        # Lightning's error on the first run: the generator gets no gradient from the discriminators' loss
        strategy="ddp_find_unused_parameters_true",
        max_epochs=a.training_epochs,
        default_root_dir=os.path.join(a.checkpoint_path, "logs"),
        log_every_n_steps=a.summary_interval,
        enable_checkpointing=False,  # the module saves the program's own checkpoints
        use_distributed_sampler=False,  # the train loader brings its own
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
