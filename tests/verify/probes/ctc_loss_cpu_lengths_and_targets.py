# expect: ok
# rule: ctc_loss copies CPU input/target lengths to the CPU itself and moves CPU targets to the log-probs' device (the cuDNN path wants them there)
import torch

log_probs = torch.randn(7, 2, 5, device="cuda").log_softmax(2).requires_grad_()
targets = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
input_lengths = torch.tensor([7, 7], dtype=torch.int32)
target_lengths = torch.tensor([2, 2], dtype=torch.int32)
loss = torch.nn.CTCLoss(zero_infinity=True)(log_probs, targets, input_lengths, target_lengths)
loss.backward()
assert loss.device.type == "cuda" and log_probs.grad.device.type == "cuda"
on_cuda = torch.nn.functional.ctc_loss(log_probs, targets.cuda(), input_lengths.cuda(), target_lengths.cuda())
assert on_cuda.device.type == "cuda"
