# expect: ok
# rule: ctc_loss on CPU log-probs reads CUDA lengths and targets too (copied to the CPU first)
import torch

log_probs = torch.randn(7, 2, 5).log_softmax(2)
loss = torch.nn.functional.ctc_loss(log_probs, torch.tensor([1, 2, 3, 4], device="cuda"),
                                    torch.tensor([7, 7], device="cuda"), torch.tensor([2, 2], device="cuda"))
assert loss.device.type == "cpu"
