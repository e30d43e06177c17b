"""Stand-ins for what DETR's training path imports and this machine lacks: torchvision (a tiny ResNet built as
torchvision's is, IntermediateLayerGetter, box_area, interpolate, the PIL transforms DETR calls, RandomCrop.get_params,
CocoDetection), scipy's linear_sum_assignment (an exact brute force) and the COCO images (a synthetic detection set
drawn from a fixed seed). Not part of facebookresearch/detr; written for this corpus."""

from __future__ import annotations

import itertools
import types
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

__version__ = "0.20.0"  # torchvision's, for util/misc.py's version checks (>= 0.7: the plain interpolate path)


def _is_tracing():
    return torch._C._get_tracing_state() is not None


# --- torchvision.models: ResNet as torchvision builds it (BasicBlock), with a width of its own for "resnet_tiny" ---


def conv3x3(in_planes, out_planes, stride=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=dilation, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, dilation=1, norm_layer=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes, dilation=dilation)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers, width=64, num_classes=1000, replace_stride_with_dilation=None, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = width
        self.dilation = 1
        replace_stride_with_dilation = replace_stride_with_dilation or [False, False, False]
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2, dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2, dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(width * 8, layers[3], stride=2, dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes, stride), norm_layer(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample, previous_dilation, norm_layer)]
        self.inplanes = planes
        for _ in range(1, blocks):
            layers.append(BasicBlock(self.inplanes, planes, dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _pretrained(model):
    """torchvision would download ImageNet weights here (DETR asks for them on rank 0 only): a fixed, private generator
    fills every parameter and buffer instead, drawing nothing from the global generators."""
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if not t.is_floating_point():
                continue
            noise = torch.randn(t.shape, generator=g) * 0.1
            t.copy_(1 + noise.abs() if name.endswith(("running_var", "weight")) and t.dim() == 1 else noise)
    return model


def resnet18(pretrained=False, **kwargs):
    model = ResNet([2, 2, 2, 2], **kwargs)
    return _pretrained(model) if pretrained else model


def resnet_tiny(pretrained=False, **kwargs):
    """resnet18's layout with one block a stage and a width of 8 (64 channels out of layer4)."""
    model = ResNet([1, 1, 1, 1], width=8, **kwargs)
    return _pretrained(model) if pretrained else model


class IntermediateLayerGetter(nn.ModuleDict):
    def __init__(self, model, return_layers):
        orig_return_layers = return_layers
        return_layers = {str(k): str(v) for k, v in return_layers.items()}
        layers = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            if name in return_layers:
                del return_layers[name]
            if not return_layers:
                break
        super().__init__(layers)
        self.return_layers = orig_return_layers

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out


models = types.SimpleNamespace(resnet18=resnet18, resnet_tiny=resnet_tiny)
models._utils = types.SimpleNamespace(IntermediateLayerGetter=IntermediateLayerGetter)


# --- torchvision.ops ---


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return F.interpolate(input, size, scale_factor, mode, align_corners)


ops = types.SimpleNamespace(
    boxes=types.SimpleNamespace(box_area=box_area), misc=types.SimpleNamespace(interpolate=interpolate)
)


# --- torchvision.transforms(.functional) on PIL images, as DETR calls them ---


def crop(img, top, left, height, width):
    return img.crop((left, top, left + width, top + height))


def hflip(img):
    return img.transpose(Image.FLIP_LEFT_RIGHT)


def resize(img, size):
    h, w = size
    return img.resize((w, h), Image.BILINEAR)


def pad(img, padding):
    raise NotImplementedError("not on DETR's training path")


def to_tensor(img):
    arr = np.asarray(img, dtype=np.uint8).copy()
    return torch.from_numpy(arr).permute(2, 0, 1).contiguous().float().div(255)


def normalize(tensor, mean, std):
    mean = torch.as_tensor(mean, dtype=tensor.dtype)[:, None, None]
    std = torch.as_tensor(std, dtype=tensor.dtype)[:, None, None]
    return (tensor - mean) / std


class RandomCrop:
    @staticmethod
    def get_params(img, output_size):
        """torchvision's: the offsets drawn from the global torch generator."""
        w, h = img.size
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        i = torch.randint(0, h - th + 1, size=(1,)).item()
        j = torch.randint(0, w - tw + 1, size=(1,)).item()
        return i, j, th, tw


class RandomErasing:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("not on DETR's training path")


transforms = types.SimpleNamespace(RandomCrop=RandomCrop, RandomErasing=RandomErasing)
transforms.functional = types.SimpleNamespace(
    crop=crop, hflip=hflip, resize=resize, pad=pad, to_tensor=to_tensor, normalize=normalize
)


# --- torchvision.datasets.CocoDetection over a synthetic COCO-like set ---

SIZES = {"train": 16, "val": 8}  # images per split
NUM_LABELS = 90  # COCO's category ids 1..90


def synthetic_image(split, index):
    """One image (48..80 px a side, its own size) with 1..3 boxes of COCO's [x, y, w, h], drawn from a fixed seed of
    its own (nothing from the global generators)."""
    rng = np.random.RandomState(1000 * (split == "val") + index)
    w, h = (int(v) for v in rng.randint(48, 81, size=2))
    pixels = rng.randint(0, 64, size=(h, w, 3)).astype(np.uint8)
    annotations = []
    for k in range(int(rng.randint(1, 4))):
        bw, bh = int(rng.randint(8, w // 2)), int(rng.randint(8, h // 2))
        x, y = int(rng.randint(0, w - bw)), int(rng.randint(0, h - bh))
        label = int(rng.randint(1, NUM_LABELS + 1))
        pixels[y : y + bh, x : x + bw] = (label * 37 % 256, label * 91 % 256, label * 53 % 256)
        annotations.append(
            {"id": index * 10 + k, "image_id": index, "bbox": [x, y, bw, bh], "category_id": label, "area": bw * bh}
        )
    return Image.fromarray(pixels, "RGB"), annotations


class CocoDetection(torch.utils.data.Dataset):
    """torchvision's CocoDetection (image, list of annotation dicts) over the synthetic set: the split is read from
    the annotation file's name, no file is opened."""

    def __init__(self, root, annFile, transform=None, target_transform=None, transforms=None):
        self.root = root
        self.split = "train" if "train" in str(annFile) else "val"
        self.ids = list(range(SIZES[self.split]))
        self.coco = None  # pycocotools' COCO api: not here (the COCO evaluation is trimmed)

    def __getitem__(self, index):
        return synthetic_image(self.split, self.ids[index])

    def __len__(self):
        return len(self.ids)


datasets = types.SimpleNamespace(CocoDetection=CocoDetection)


# --- scipy.optimize.linear_sum_assignment ---


def linear_sum_assignment(cost):
    """Exact, by brute force over every injective assignment of the smaller side (the tiny sizes here: at most a few
    targets against a few queries); rows sorted as scipy returns them. Ties go to the first assignment met."""
    c = np.asarray(cost, dtype=np.float64)
    transposed = c.shape[1] > c.shape[0]
    if transposed:
        c = c.T
    n_rows, n_cols = c.shape
    if n_cols == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    best, best_rows = None, None
    cols = np.arange(n_cols)
    for rows in itertools.permutations(range(n_rows), n_cols):
        total = c[list(rows), cols].sum()
        if best is None or total < best:
            best, best_rows = total, rows
    rows = np.asarray(best_rows, dtype=np.int64)
    if transposed:
        rows, cols = cols, rows
    order = np.argsort(rows)
    return rows[order], cols[order]
