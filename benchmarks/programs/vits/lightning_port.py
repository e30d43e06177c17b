"""jaywalnut310/vits train.py as a LightningModule: the generator and the multi-period discriminator trained in turn
with manual optimization, on Lightning's own DDP launcher (`python lightning_port.py -c CONFIG -m MODEL`, the same
arguments as train.py). The model, data, losses and mel code are the program's own, imported."""

import commons
import lightning as L
import torch
import utils
from data_utils import DistributedBucketSampler, TextAudioCollate, TextAudioLoader
from losses import discriminator_loss, feature_loss, generator_loss, kl_loss
from mel_processing import mel_spectrogram_torch, spec_to_mel_torch
from models import MultiPeriodDiscriminator, SynthesizerTrn
from text.symbols import symbols
from torch.nn import functional as F
from torch.utils.data import DataLoader


class VITS(L.LightningModule):
    def __init__(self, hps):
        super().__init__()
        self.hps = hps
        self.automatic_optimization = False  # two optimizers stepped in turn: a GAN

    def configure_model(self):
        # built after Lightning's re-seed (reset_seed before training), as train.py builds them after its one seed
        hps = self.hps
        self.net_g = SynthesizerTrn(
            len(symbols), hps.data.filter_length // 2 + 1, hps.train.segment_size // hps.data.hop_length, **hps.model
        )
        self.net_d = MultiPeriodDiscriminator(hps.model.use_spectral_norm)

    def train_dataloader(self):
        hps = self.hps
        dataset = TextAudioLoader(hps.data.training_files, hps.data)
        sampler = DistributedBucketSampler(
            dataset,
            hps.train.batch_size,
            [32, 300, 400, 500, 600, 700, 800, 900, 1000],
            num_replicas=self.trainer.world_size,
            rank=self.trainer.global_rank,
            shuffle=True,
        )
        # the first epoch's iterator is made before on_train_epoch_start: its epoch is set here
        sampler.set_epoch(self.current_epoch + 1)
        return DataLoader(dataset, num_workers=0, shuffle=False, collate_fn=TextAudioCollate(), batch_sampler=sampler)

    def setup(self, stage):
        # train.py evaluates on rank 0 alone, inside its training loop, every eval_interval iterations: the same here
        if self.global_rank == 0:
            hps = self.hps
            dataset = TextAudioLoader(hps.data.validation_files, hps.data)
            self.eval_loader = DataLoader(
                dataset, num_workers=0, shuffle=False, batch_size=hps.train.batch_size, collate_fn=TextAudioCollate()
            )

    def configure_optimizers(self):
        hps = self.hps
        optim_g = torch.optim.AdamW(
            self.net_g.parameters(), hps.train.learning_rate, betas=hps.train.betas, eps=hps.train.eps
        )
        optim_d = torch.optim.AdamW(
            self.net_d.parameters(), hps.train.learning_rate, betas=hps.train.betas, eps=hps.train.eps
        )
        scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=hps.train.lr_decay)
        scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=hps.train.lr_decay)
        return [optim_g, optim_d], [scheduler_g, scheduler_d]

    def training_step(self, batch, batch_idx):
        hps = self.hps
        optim_g, optim_d = self.optimizers()
        global_step = self.global_step // 2  # train.py's global_step: iterations (Lightning counts both optimizers)
        x, x_lengths, spec, spec_lengths, y, y_lengths = batch

        y_hat, l_length, attn, ids_slice, x_mask, z_mask, (z, z_p, m_p, logs_p, m_q, logs_q) = self.net_g(
            x, x_lengths, spec, spec_lengths
        )
        mel = spec_to_mel_torch(
            spec,
            hps.data.filter_length,
            hps.data.n_mel_channels,
            hps.data.sampling_rate,
            hps.data.mel_fmin,
            hps.data.mel_fmax,
        )
        y_mel = commons.slice_segments(mel, ids_slice, hps.train.segment_size // hps.data.hop_length)
        y_hat_mel = mel_spectrogram_torch(
            y_hat.squeeze(1),
            hps.data.filter_length,
            hps.data.n_mel_channels,
            hps.data.sampling_rate,
            hps.data.hop_length,
            hps.data.win_length,
            hps.data.mel_fmin,
            hps.data.mel_fmax,
        )
        y = commons.slice_segments(y, ids_slice * hps.data.hop_length, hps.train.segment_size)

        # Discriminator
        y_d_hat_r, y_d_hat_g, _, _ = self.net_d(y, y_hat.detach())
        loss_disc, losses_disc_r, losses_disc_g = discriminator_loss(y_d_hat_r, y_d_hat_g)
        optim_d.zero_grad()
        self.manual_backward(loss_disc)
        grad_norm_d = commons.clip_grad_value_(self.net_d.parameters(), None)
        optim_d.step()

        # Generator
        y_d_hat_r, y_d_hat_g, fmap_r, fmap_g = self.net_d(y, y_hat)
        loss_dur = torch.sum(l_length.float())
        loss_mel = F.l1_loss(y_mel, y_hat_mel) * hps.train.c_mel
        loss_kl = kl_loss(z_p, logs_q, m_p, logs_p, z_mask) * hps.train.c_kl
        loss_fm = feature_loss(fmap_r, fmap_g)
        loss_gen, losses_gen = generator_loss(y_d_hat_g)
        loss_gen_all = loss_gen + loss_fm + loss_mel + loss_dur + loss_kl
        optim_g.zero_grad()
        self.manual_backward(loss_gen_all)
        grad_norm_g = commons.clip_grad_value_(self.net_g.parameters(), None)
        optim_g.step()

        self.log_dict(
            {
                "loss/g/total": loss_gen_all,
                "loss/d/total": loss_disc,
                "loss/g/mel": loss_mel,
                "grad_norm_d": grad_norm_d,
                "grad_norm_g": grad_norm_g,
            },
            prog_bar=True,
        )

        if self.global_rank == 0 and global_step % hps.train.eval_interval == 0:
            self.evaluate()
            epoch = self.current_epoch + 1
            model_dir = hps.model_dir
            lr = hps.train.learning_rate
            utils.save_checkpoint(self.net_g, optim_g.optimizer, lr, epoch, f"{model_dir}/G_{global_step}.pth")
            utils.save_checkpoint(self.net_d, optim_d.optimizer, lr, epoch, f"{model_dir}/D_{global_step}.pth")

    def on_train_epoch_start(self):
        # Lightning sets the epoch of a DataLoader's sampler, not of its batch_sampler: the bucket sampler's epoch is
        # set here, counted from 1 as train.py's epochs are
        self.trainer.train_dataloader.batch_sampler.set_epoch(self.current_epoch + 1)

    def on_train_epoch_end(self):
        # manual optimization: the schedulers are stepped by hand, once per epoch as in train.py
        scheduler_g, scheduler_d = self.lr_schedulers()
        scheduler_g.step()
        scheduler_d.step()

    def evaluate(self):
        hps = self.hps
        self.net_g.eval()
        with torch.no_grad():
            for x, x_lengths, *_ in self.eval_loader:
                x, x_lengths = x[:1], x_lengths[:1]
                break
            y_hat, attn, mask, *_ = self.net_g.infer(x, x_lengths, max_len=1000)
            mel_spectrogram_torch(
                y_hat.squeeze(1).float(),
                hps.data.filter_length,
                hps.data.n_mel_channels,
                hps.data.sampling_rate,
                hps.data.hop_length,
                hps.data.win_length,
                hps.data.mel_fmin,
                hps.data.mel_fmax,
            )
        self.net_g.train()


def main():
    hps = utils.get_hparams()
    L.seed_everything(hps.train.seed)
    model = VITS(hps)
    trainer = L.Trainer(
        strategy="ddp_find_unused_parameters_true",  # the discriminator step leaves the generator unused
        accelerator="cpu",
        devices=2,
        max_epochs=hps.train.epochs,
        precision="16-mixed" if hps.train.fp16_run else "32-true",
        use_distributed_sampler=False,  # DistributedBucketSampler already splits by rank
        log_every_n_steps=hps.train.log_interval,
        num_sanity_val_steps=0,  # the sanity check's loader and inference draw from the global generator
        enable_checkpointing=False,  # train.py's own G_*.pth / D_*.pth checkpoints, saved in training_step
        default_root_dir=hps.model_dir,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
