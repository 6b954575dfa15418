# expect: ok
# rule: load_state_dict casts the state to each parameter's device, so moving first then loading works
import torch

model = torch.nn.Linear(3, 2)
optimizer = torch.optim.Adam(model.parameters())
model(torch.randn(4, 3)).sum().backward()
optimizer.step()
saved = optimizer.state_dict()
model.cuda()
optimizer = torch.optim.Adam(model.parameters())
optimizer.load_state_dict(saved)
model(torch.randn(4, 3, device="cuda")).sum().backward()
optimizer.step()
