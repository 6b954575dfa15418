# expect: device-error
# rule: where cuDNN's CTC kernel is eligible (float32 GPU log-probs, blank 0, 1-D int32 targets, int32 length tensors), the "mean" reduction divides by the target lengths where they are, so CPU ones fail (seen on an H200, PyTorch 2.11)
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

log_probs = torch.randn(7, 2, 5, device="cuda").log_softmax(2)
targets = torch.IntTensor([1, 2, 3, 4])
input_lengths = torch.IntTensor([7, 6])
target_lengths = torch.IntTensor([2, 2])
loss = torch.nn.CTCLoss()(log_probs, targets, input_lengths, target_lengths)
