"""Names that say whether a parameter is a tensor, shared by the libcst rules (``devices``) and the
project index's ``ast`` reading (``unplaceable_classes``); no libcst here (the warm path)."""

from __future__ import annotations

import re

# Parameters of forward() that are seldom a tensor: containers and configuration.
NON_TENSOR_PARAMS = frozenset({"batch", "data", "inputs_dict", "kwargs", "config", "mask_dict"})
# ``forward(self, seq_len)``, ``forward(self, num_steps)``: a count, not a tensor (cleanrl's positional encoding).
COUNT_NAME = re.compile(r"(^|_)(len|length|size|count|num|n|steps?)($|_)|^num_|^n_")
# Read only on a torch tensor (a NumPy array has none of them, or ``size`` as a number).
TORCH_ONLY_ATTRIBUTES = frozenset({"device", "is_cuda", "dim", "unsqueeze", "new_zeros", "new_ones", "new_full",
                                   "new_empty", "new_tensor", "masked_fill", "masked_fill_", "scatter", "scatter_",
                                   "index_select"})
