"""A TensorDataset / DataLoader training loop that never moves the batch.

The model is on the GPU, each batch comes out of the DataLoader on the CPU:
"Expected all tensors to be on the same device". devmod moves the batch at the top
of the loop (DM203) and leaves the dataset tensors on the CPU, where they belong.
"""
# expect-before: device-error
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

features = torch.randn(64, 5)
labels = torch.randint(0, 3, (64,))
loader = DataLoader(TensorDataset(features, labels), batch_size=16, shuffle=True)

model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(2):
    for batch_x, batch_y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(batch_x), batch_y)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
