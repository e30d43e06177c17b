"""pycls's `tools/run_net.py --mode train` (facebookresearch/pycls, MIT) as a LightningModule, run by Lightning's own
launcher: `python lightning_port.py --mode train --cfg CONFIG [KEY VALUE ...]`, the same arguments as run_net.py.
The config, model, loss, label smoothing, mixup, EMA, precise BN, lr policy, data set and error meters are pycls's
own code, imported; Lightning does the processes, the DDP wrapping, the sampler, the loop and the checkpoints."""

from __future__ import annotations

from copy import deepcopy

import lightning as L
import standins  # noqa: F401  (yacs, iopath, simplejson, ... before any pycls module)
import torch

# isort: split
import pycls.core.builders as builders
import pycls.core.config as config
import pycls.core.meters as meters
import pycls.core.net as net
import pycls.core.optimizer as optim
import pycls.datasets.loader as data_loader
from pycls.core.config import cfg
from run_net import parse_args


class PyclsModule(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = None  # built in setup(), after Lightning's own re-seed, as pycls builds it after its seeds
        self.ema = None
        self.loss_fun = builders.build_loss_fun()

    def setup(self, stage):
        if self.model is None:
            # pycls's trainer.setup_model builds the model twice (once above its FSDP branch, again in the DDP one)
            # and keeps the second: the same draws from torch's generator here
            builders.build_model()
            self.model = builders.build_model()
            self.ema = deepcopy(self.model)
            self.ema.requires_grad_(False)  # averaged, never trained

    # --- data -------------------------------------------------------------------------------------------------
    # pycls's own loaders, with its DistributedSampler (seed 0) rather than the one Lightning injects (seeded from
    # PL_GLOBAL_SEED): Trainer(use_distributed_sampler=False); Lightning calls its set_epoch every epoch
    def train_dataloader(self):
        return data_loader.construct_train_loader()

    def val_dataloader(self):
        # the model and the EMA are tested in two passes over the test set, as trainer.train_model does (each pass
        # starts a DataLoader iterator, which draws its base seed from torch's generator)
        return [data_loader.construct_test_loader(), data_loader.construct_test_loader()]

    # --- optimization -----------------------------------------------------------------------------------------
    def configure_optimizers(self):
        optimizer = optim.construct_optimizer(self.model)
        # pycls's per-epoch policy (warmup + cos) as a multiplier of BASE_LR
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda epoch: optim.get_epoch_lr(epoch) / cfg.OPTIM.BASE_LR
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}

    def training_step(self, batch, batch_idx):
        inputs, labels = batch
        # smoothed one-hot labels, then mixup (no effect if its alpha is 0)
        labels_one_hot = net.smooth_one_hot_labels(labels)
        inputs, labels_one_hot, labels = net.mixup(inputs, labels_one_hot)
        preds = self.model(inputs)
        loss = self.loss_fun(preds, labels_one_hot)
        top1_err, top5_err = meters.topk_errors(preds, labels, [1, 5])
        self.log_dict({"loss": loss, "top1_err": top1_err, "top5_err": top5_err}, prog_bar=True, sync_dist=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        net.update_model_ema(self.model, self.ema, self.current_epoch, batch_idx)
        # precise BN stats of the model and the EMA over training batches, after the epoch's last batch and before
        # the test, as train_model does: Lightning validates inside the epoch's last step, before on_train_epoch_end
        last = batch_idx == self.trainer.num_training_batches - 1
        if last and cfg.BN.USE_PRECISE_STATS:
            net.compute_precise_bn_stats(self.model, self.trainer.train_dataloader)
            net.compute_precise_bn_stats(self.ema, self.trainer.train_dataloader)

    # --- test of the model and its EMA --------------------------------------------------------------------------
    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        inputs, labels = batch
        name, model = (("test", self.model), ("test_ema", self.ema))[dataloader_idx]
        top1_err, top5_err = meters.topk_errors(model(inputs), labels, [1, 5])
        self.log_dict({f"{name}_top1_err": top1_err, f"{name}_top5_err": top5_err}, sync_dist=True)


def main():
    args = parse_args()
    config.load_cfg(args.cfg)
    cfg.merge_from_list(args.opts)
    config.assert_cfg()
    cfg.freeze()
    L.seed_everything(cfg.RNG_SEED)
    module = PyclsModule()
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=cfg.NUM_GPUS,
        max_epochs=cfg.OPTIM.MAX_EPOCH,
        default_root_dir=cfg.OUT_DIR,
        log_every_n_steps=cfg.LOG_PERIOD,
        use_distributed_sampler=False,
    )
    trainer.fit(module)


if __name__ == "__main__":
    main()
