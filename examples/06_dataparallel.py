"""DataParallel: wrap the model when several GPUs exist, move it, forget the input.

The wrapped model is moved to the device, the input stays on the CPU, so the first
layer sees two devices. devmod moves the input where it is created (DM201).
"""
# expect-before: device-error
import torch
import torch.nn as nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(10, 1)

    def forward(self, x):
        return self.linear(x)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinyNet()
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    model.to(device)
    batch = torch.randn(8, 10)
    print("output", tuple(model(batch).shape))


if __name__ == "__main__":
    main()
