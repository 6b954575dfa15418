# expect: device-error
# rule: an optimizer whose state lives on another device than its params fails in step()
import torch

model = torch.nn.Linear(3, 2)
optimizer = torch.optim.Adam(model.parameters())
model(torch.randn(4, 3)).sum().backward()
optimizer.step()  # the Adam state is created on the CPU, next to the parameters
model.cuda()  # the parameters move, the optimizer state does not
optimizer.zero_grad()
model(torch.randn(4, 3, device="cuda")).sum().backward()
optimizer.step()
