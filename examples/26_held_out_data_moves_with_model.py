"""Evaluation data sliced out of a dataset, next to the batches of a DataLoader.

A script that has only ever run on the CPU. The training batches come from a DataLoader;
the evaluation tensors are taken straight from the dataset's storage (`.tensors[0][:32]`),
and a probe set is made with a legacy `.type(torch.FloatTensor)` cast. When devmod moves
the model, everything that meets it moves too, where it is made: the batches, the sliced
evaluation inputs, the labels compared with the model's predictions, the probe set. The
label array read with NumPy and the table that only builds the dataset stay on the CPU.
"""
# expect-before: cpu-only
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
points = torch.randn(256, 6)
classes = (points[:, 0] + points[:, 3] > 0).long()
table = TensorDataset(points, classes)
loader = DataLoader(table, batch_size=64, shuffle=True)

check_x = table.tensors[0][:32]
check_y = table.tensors[1][:32]
label_array = table.tensors[1][32:64].numpy()
probe = (table.tensors[0][64:72] * 10).type(torch.HalfTensor)

classifier = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(classifier.parameters(), lr=0.01)
for epoch in range(3):
    for features, target in loader:
        loss = nn.functional.cross_entropy(classifier(features), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    hits = (classifier(check_x).argmax(dim=1) == check_y).float().mean()
    print(f"epoch {epoch}: held-out accuracy {hits.item():.2f}")

scores = classifier(probe.float()).softmax(dim=1)
print(scores.shape, label_array.sum(), check_x.shape[0])
