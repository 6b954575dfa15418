"""The transforms the trial repositories use, on PIL images and on CHW tensors."""

from __future__ import annotations

import random

import numpy as np
import torch
import torch.nn.functional as F


def _size_pair(size):
    return (size, size) if isinstance(size, int) else tuple(size)


def _is_pil(img) -> bool:
    return hasattr(img, "getbands")


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ToTensor:
    def __call__(self, pic):
        if isinstance(pic, torch.Tensor):
            return pic.float() / 255.0 if pic.dtype == torch.uint8 else pic
        array = np.asarray(pic)
        if array.ndim == 2:
            array = array[:, :, None]
        out = torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()
        return out.float().div(255.0) if out.dtype == torch.uint8 else out.float()


class PILToTensor(ToTensor):
    pass


class Normalize:
    def __init__(self, mean, std, inplace: bool = False):
        self.mean, self.std = mean, std

    def __call__(self, t):
        mean = torch.as_tensor(self.mean, dtype=t.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=t.dtype).view(-1, 1, 1)
        return (t - mean) / std


class Lambda:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, img):
        return self.fn(img)


class Resize:
    def __init__(self, size, *args, **kwargs):
        self.size = size

    def __call__(self, img):
        if _is_pil(img):
            if isinstance(self.size, int):
                w, h = img.size
                scale = self.size / min(w, h)
                return img.resize((max(1, round(w * scale)), max(1, round(h * scale))))
            return img.resize(tuple(reversed(self.size)))
        h, w = img.shape[-2:]
        if isinstance(self.size, int):
            scale = self.size / min(h, w)
            target = (max(1, round(h * scale)), max(1, round(w * scale)))
        else:
            target = tuple(self.size)
        return F.interpolate(img.unsqueeze(0).float(), size=target, mode="bilinear", align_corners=False)[0]


Scale = Resize


class CenterCrop:
    def __init__(self, size):
        self.size = _size_pair(size)

    def __call__(self, img):
        th, tw = self.size
        if _is_pil(img):
            w, h = img.size
            left, top = max(0, (w - tw) // 2), max(0, (h - th) // 2)
            return img.crop((left, top, left + tw, top + th))
        h, w = img.shape[-2:]
        top, left = max(0, (h - th) // 2), max(0, (w - tw) // 2)
        return img[..., top:top + th, left:left + tw]


class RandomCrop(CenterCrop):
    def __init__(self, size, padding=None, **kwargs):
        super().__init__(size)


class RandomResizedCrop:
    def __init__(self, size, *args, **kwargs):
        self.resize = Resize(_size_pair(size))

    def __call__(self, img):
        return self.resize(img)


class _Identity:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, img):
        return img


class RandomHorizontalFlip:
    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, img):
        if random.random() >= self.p:
            return img
        if _is_pil(img):
            from PIL import Image
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img.flip(-1)


class Grayscale:
    def __init__(self, num_output_channels: int = 1):
        self.n = num_output_channels

    def __call__(self, img):
        if _is_pil(img):
            return img.convert("L") if self.n == 1 else img.convert("L").convert("RGB")
        gray = img.mean(dim=-3, keepdim=True)
        return gray.expand(*img.shape[:-3], self.n, *img.shape[-2:]).contiguous()


class RandomApply:
    def __init__(self, transforms, p: float = 0.5):
        self.transforms, self.p = list(transforms), p

    def __call__(self, img):
        if random.random() < self.p:
            for t in self.transforms:
                img = t(img)
        return img


RandomVerticalFlip = RandomRotation = ColorJitter = GaussianBlur = RandomGrayscale = Pad = _Identity
RandomSolarize = RandomErasing = AutoAugment = RandAugment = TrivialAugmentWide = _Identity
