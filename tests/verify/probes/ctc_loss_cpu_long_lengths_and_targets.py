# expect: ok
# rule: ctc_loss copies CPU int64 input/target lengths to the CPU itself and moves CPU targets to the log-probs' device; int32 lengths do too outside the cuDNN "mean" case (seen on an H200)
import torch

log_probs = torch.randn(7, 2, 5, device="cuda").log_softmax(2).requires_grad_()
targets = torch.tensor([1, 2, 3, 4])
input_lengths = torch.tensor([7, 7])
target_lengths = torch.tensor([2, 2])
loss = torch.nn.CTCLoss(zero_infinity=True)(log_probs, targets, input_lengths, target_lengths)
loss.backward()
assert loss.device.type == "cuda" and log_probs.grad.device.type == "cuda"
int32 = [t.int() for t in (targets, input_lengths, target_lengths)]
assert torch.nn.functional.ctc_loss(log_probs, *int32, reduction="sum").device.type == "cuda"
assert torch.nn.functional.ctc_loss(log_probs, *int32, blank=4).device.type == "cuda"
assert torch.nn.functional.ctc_loss(log_probs, int32[0], int32[1], int32[2].cuda()).device.type == "cuda"
on_cuda = torch.nn.functional.ctc_loss(log_probs, targets.cuda(), input_lengths.cuda(), target_lengths.cuda())
assert on_cuda.device.type == "cuda"
