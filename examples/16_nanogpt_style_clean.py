"""Already device-correct, in the style of nanoGPT: positions built with
`device=idx.device`, the causal mask registered as a buffer.

devmod must leave this file byte-identical.
"""
# expect-before: clean
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyCausalLM(nn.Module):
    def __init__(self, vocab, block, width):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(block, width)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, block, block))
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        att = (x @ x.transpose(1, 2)).masked_fill(self.bias[:, :t, :t] == 0, float("-inf"))
        x = F.softmax(att, dim=-1) @ x
        logits = self.head(x)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyCausalLM(vocab=11, block=8, width=16)
    model.to(device)
    idx = torch.randint(0, 11, (2, 8), device=device)
    logits, loss = model(idx, idx)
    print("loss", round(loss.item(), 4))
