# expect: device-error
# rule: CUDA indices into a CPU tensor fail
# message: indices should be either on cpu or on the same device as the indexed tensor (cpu)
import torch

schedule = torch.linspace(0, 1, 10)
t = torch.randint(0, 10, (4,), device="cuda")
alpha = schedule[t]
