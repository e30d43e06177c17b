# Source: pytorch/examples, imagenet/main.py (BSD 3-Clause License, Copyright (c) 2017, Pytorch contributors; see
# ../ddp_tutorial/LICENSE.pytorch-examples), the version that sets the learning rate by hand every epoch
# (adjust_learning_rate, before it became StepLR). The loop as written; trimmed to the torchrun path (env://),
# CPU and gloo: no --gpu / --multiprocessing-distributed / resume / evaluate paths. torchvision's ImageFolder and
# resnet18 are stood in for by a synthetic 10-class image set and a tiny CNN (no download).
# The lines marked `# parity` are the ddp-parity instrumentation (docs/plugin.md).
import argparse
import os
import random
import shutil
import time
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.parallel
import torch.optim
import torch.utils.data
import torch.utils.data.distributed
from torch.utils.data import TensorDataset

from ddp_parity import TraceRecorder, destroy_process_group  # parity

parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
parser.add_argument("--epochs", default=90, type=int, metavar="N", help="number of total epochs to run")
parser.add_argument("--start-epoch", default=0, type=int, metavar="N", help="manual epoch number (useful on restarts)")
parser.add_argument("-b", "--batch-size", default=256, type=int, metavar="N", help="mini-batch size (default: 256)")
parser.add_argument("--lr", "--learning-rate", default=0.1, type=float, metavar="LR", help="initial learning rate")
parser.add_argument("--momentum", default=0.9, type=float, metavar="M", help="momentum")
parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, metavar="W", dest="weight_decay")
parser.add_argument("-p", "--print-freq", default=10, type=int, metavar="N", help="print frequency (default: 10)")
parser.add_argument("--dist-backend", default="gloo", type=str, help="distributed backend")
parser.add_argument("--seed", default=None, type=int, help="seed for initializing training. ")
parser.add_argument("--train-size", default=64, type=int, help="synthetic images (stands in for ImageFolder)")
parser.add_argument("--val-size", default=32, type=int)
parser.add_argument("--run-dir", default="trace", help="where the trace goes")  # parity

best_acc1 = 0


def tiny_cnn(num_classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.Linear(32, num_classes),
    )


def synthetic_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 3, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g))


def main():
    args = parser.parse_args()

    if args.seed is not None:
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        warnings.warn(  # noqa: B028 (as written)
            "You have chosen to seed training. "
            "This will turn on the CUDNN deterministic setting, "
            "which can slow down your training considerably! "
            "You may see unexpected behavior when restarting "
            "from checkpoints."
        )
    main_worker(args)


def main_worker(args):
    global best_acc1
    dist.init_process_group(backend=args.dist_backend, init_method="env://")
    args.rank, args.world_size = dist.get_rank(), dist.get_world_size()
    config = {k: v for k, v in vars(args).items() if k not in ("run_dir", "rank")}  # parity
    recorder = TraceRecorder(args.run_dir, side="raw", config=config)  # parity
    recorder.start()  # parity
    # create model
    print("=> creating model 'tiny_cnn'")
    model = tiny_cnn()
    # When using a single GPU per process and per DistributedDataParallel, we need to divide the batch size
    # ourselves based on the total number of GPUs we have (here: processes)
    args.batch_size = int(args.batch_size / args.world_size)
    model = torch.nn.parallel.DistributedDataParallel(model)

    # define loss function (criterion) and optimizer
    criterion = nn.CrossEntropyLoss()

    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)

    # Data loading code
    train_dataset = synthetic_images(args.train_size, seed=1)
    val_dataset = synthetic_images(args.val_size, seed=2)
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)

    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None), sampler=train_sampler
    )

    val_loader = torch.utils.data.DataLoader(val_dataset, batch_size=args.batch_size, shuffle=False)

    args.step = 0  # parity
    for epoch in range(args.start_epoch, args.epochs):
        train_sampler.set_epoch(epoch)
        adjust_learning_rate(optimizer, epoch, args)

        # train for one epoch
        # parity, as written: train(train_loader, model, criterion, optimizer, epoch, args)
        train(train_loader, model, criterion, optimizer, epoch, args, recorder)  # parity

        # evaluate on validation set
        acc1 = validate(val_loader, model, criterion, args)
        recorder.record_validation(epoch, args.step, {"acc1": acc1})  # parity

        # remember best acc@1 and save checkpoint
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)

        if args.rank == 0:
            save_checkpoint(
                {
                    "epoch": epoch + 1,
                    "arch": "tiny_cnn",
                    "state_dict": model.state_dict(),
                    "best_acc1": best_acc1,
                    "optimizer": optimizer.state_dict(),
                },
                is_best,
            )
    recorder.finish(model)  # parity
    del model  # teardown, not recording: the DDP wrapper dropped before destroy_process_group (docs/plugin.md)
    destroy_process_group()  # parity


# parity, as written: def train(train_loader, model, criterion, optimizer, epoch, args):
def train(train_loader, model, criterion, optimizer, epoch, args, recorder):  # parity
    batch_time = AverageMeter("Time", ":6.3f")
    data_time = AverageMeter("Data", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    top5 = AverageMeter("Acc@5", ":6.2f")
    progress = ProgressMeter(len(train_loader), [batch_time, data_time, losses, top1, top5], prefix=f"Epoch: [{epoch}]")

    # switch to train mode
    model.train()

    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        # measure data loading time
        data_time.update(time.time() - end)

        # compute output
        output = model(images)
        loss = criterion(output, target)

        # measure accuracy and record loss
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0], images.size(0))
        top5.update(acc5[0], images.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])  # parity
        optimizer.step()
        args.step += 1  # parity
        recorder.record(
            args.step, loss, epoch=epoch, grad_norm=grad_norm, batch=(images, target), optimizer=optimizer, model=model
        )  # parity

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0:
            progress.display(i)


def validate(val_loader, model, criterion, args):
    batch_time = AverageMeter("Time", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    top5 = AverageMeter("Acc@5", ":6.2f")
    progress = ProgressMeter(len(val_loader), [batch_time, losses, top1, top5], prefix="Test: ")

    # switch to evaluate mode
    model.eval()

    with torch.no_grad():
        end = time.time()
        for i, (images, target) in enumerate(val_loader):
            # compute output
            output = model(images)
            loss = criterion(output, target)

            # measure accuracy and record loss
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0], images.size(0))
            top5.update(acc5[0], images.size(0))

            # measure elapsed time
            batch_time.update(time.time() - end)
            end = time.time()

            if i % args.print_freq == 0:
                progress.display(i)

        print(f" * Acc@1 {top1.avg:.3f} Acc@5 {top5.avg:.3f}")

    return top1.avg


def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "model_best.pth.tar")


class AverageMeter:
    """Computes and stores the average and current value"""

    def __init__(self, name, fmt=":f"):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)


class ProgressMeter:
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print("\t".join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = "{:" + str(num_digits) + "d}"
        return "[" + fmt + "/" + fmt.format(num_batches) + "]"


def adjust_learning_rate(optimizer, epoch, args):
    """Sets the learning rate to the initial LR decayed by 10 every 30 epochs"""
    lr = args.lr * (0.1 ** (epoch // 30))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))

        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
