# expect: device-error
# rule: a CPU batch into a convolution on the GPU fails the same-device check (the H100 run of tests/verify/test_sim_device_rules.py with PyTorch 2.11 raised "Expected all tensors to be on the same device, but ...")
import torch

conv = torch.nn.Conv2d(3, 8, 3).cuda()
images = torch.randn(2, 3, 16, 16)
features = conv(images)
