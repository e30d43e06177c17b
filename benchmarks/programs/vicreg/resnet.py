"""Stands in for vicreg's resnet.py (its ResNet-50, 2048 features): a tiny CNN of the same interface, returning the
backbone and its embedding size."""

import torch
from torch import nn


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d(4)

    def forward(self, x):
        return torch.flatten(self.avgpool(self.relu(self.bn1(self.conv1(x)))), 1)


def resnet50(**kwargs):
    return TinyResNet(), 128
