# expect: ok
# rule: CUDA data with CPU lengths packs, and the packed batch runs through a CUDA LSTM
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

lstm = torch.nn.LSTM(3, 5, batch_first=True).cuda()
batch = torch.randn(2, 4, 3, device="cuda")
packed = pack_padded_sequence(batch, torch.tensor([4, 2]), batch_first=True)
output, _ = lstm(packed)
padded, lengths = pad_packed_sequence(output, batch_first=True)
assert padded.device.type == "cuda" and lengths.device.type == "cpu"
