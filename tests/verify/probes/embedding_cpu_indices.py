# expect: device-error
# rule: nn.Embedding reaches index_select, whose generated check names the CPU index
# message: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)
import torch

embedding = torch.nn.Embedding(10, 4).cuda()
vectors = embedding(torch.tensor([1, 2, 3]))
