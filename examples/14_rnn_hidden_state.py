"""An LSTM whose initial hidden state is built inside `forward` with `torch.zeros`.

The hidden state lands on the CPU while the LSTM's weights are on the GPU. The fix
must not use a global device (that breaks DataParallel replicas and reuse of the
module): devmod writes `device=x.device` (DM201).
"""
# expect-before: device-error
import torch
import torch.nn as nn


class SequenceClassifier(nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.hidden = hidden
        self.lstm = nn.LSTM(features, hidden, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), self.hidden)
        c0 = torch.zeros(1, x.size(0), self.hidden)
        output, _ = self.lstm(x, (h0, c0))
        return self.out(output[:, -1])


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SequenceClassifier(4, 8, 3).to(device)
    sequences = torch.randn(5, 7, 4, device=device)
    print("logits", tuple(model(sequences).shape))
