"""Datasets that need no download: a few dozen random images and labels, shaped like the real ones.

The number of samples is TRIAL_DATASET_SIZE (default 64), so an epoch is a handful of batches."""

from __future__ import annotations

import os

import numpy as np
import torch
from PIL import Image

_SIZE = int(os.environ.get("TRIAL_DATASET_SIZE", "64"))


class _RandomImages(torch.utils.data.Dataset):
    shape = (28, 28)        # H, W
    channels = 1
    num_classes = 10

    def __init__(self, root=None, train=True, transform=None, target_transform=None, download=False,
                 split=None, **_ignored):
        rng = np.random.default_rng(0 if train in (True, "train", None) else 1)
        full = (_SIZE, *self.shape) if self.channels == 1 else (_SIZE, *self.shape, self.channels)
        self.data_np = rng.integers(0, 256, size=full, dtype=np.uint8)
        self.targets_list = [int(v) for v in rng.integers(0, self.num_classes, size=_SIZE)]
        self.transform, self.target_transform = transform, target_transform
        self.classes = [str(k) for k in range(self.num_classes)]
        self.root = root

    def __len__(self) -> int:
        return len(self.targets_list)

    def __getitem__(self, index):
        img = Image.fromarray(self.data_np[index], mode="L" if self.channels == 1 else "RGB")
        target = self.targets_list[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


class MNIST(_RandomImages):
    """Torch tensors in .data/.targets as the real MNIST has (and the old train_data/test_labels names)."""

    @property
    def data(self):
        return torch.from_numpy(self.data_np)

    @property
    def targets(self):
        return torch.tensor(self.targets_list)

    train_data = test_data = data
    train_labels = test_labels = targets


class FashionMNIST(MNIST):
    pass


class CIFAR10(_RandomImages):
    shape, channels = (32, 32), 3

    @property
    def data(self):
        return self.data_np

    @property
    def targets(self):
        return list(self.targets_list)


class CIFAR100(CIFAR10):
    num_classes = 100


class SVHN(CIFAR10):
    def __getitem__(self, index):
        img, target = super().__getitem__(index)
        return img, target


class STL10(CIFAR10):
    shape = (96, 96)


class ImageFolder(CIFAR10):
    shape = (64, 64)

    def __init__(self, root=None, transform=None, target_transform=None, **kwargs):
        super().__init__(root, True, transform, target_transform)


class LSUN(ImageFolder):
    def __init__(self, root=None, classes=None, transform=None, target_transform=None, **kwargs):
        super().__init__(root, transform, target_transform)


CelebA = ImageFolder

# Names timm's data package imports: shaped like their neighbours.
KMNIST = QMNIST = MNIST
ImageNet = ImageFolder
