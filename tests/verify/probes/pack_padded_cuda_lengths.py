# expect: device-error
# rule: pack_padded_sequence needs its lengths on the CPU
# message: 'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor
import torch
from torch.nn.utils.rnn import pack_padded_sequence

batch = torch.randn(2, 4, 3, device="cuda")
lengths = torch.tensor([4, 2], device="cuda")
packed = pack_padded_sequence(batch, lengths, batch_first=True)
