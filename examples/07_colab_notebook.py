#!/usr/bin/env python
# coding: utf-8
"""A script exported from a Colab / Jupyter notebook.

Imports are spread over cells, the model goes to `'cuda'` by string, the input is
made and normalised on the CPU and moved with `.to('cuda')`, and the result comes
back with `.cpu()`. On a machine without a GPU every cell that names CUDA fails. devmod adds one device
after the torch import and points every string at it (DM101, DM102).
"""
# expect-before: cpu-failure

# In[1]:


import torch


# In[2]:


import torch.nn as nn
import torch.nn.functional as F


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return self.head(x.flatten(1))


# In[3]:


torch.manual_seed(0)
model = SmallConvNet()
model.to('cuda')
model.eval()


# In[4]:


images = torch.rand(2, 3, 8, 8)
images = (images - images.mean()) / images.std()
images = images.to('cuda')
with torch.no_grad():
    scores = model(images)
scores = scores.cpu()
print("scores", tuple(scores.shape))
