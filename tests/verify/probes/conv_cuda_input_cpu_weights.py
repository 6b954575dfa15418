# expect: device-error
# rule: a CUDA batch into a convolution left on the CPU fails the convolution's own input/weight type check (cuDNN path), not the same-device check
# message: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same
import torch

conv = torch.nn.Conv2d(3, 8, 3)
images = torch.randn(2, 3, 16, 16, device="cuda")
features = conv(images)
