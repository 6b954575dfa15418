# expect: ok
# rule: a warning raised inside a torch call points at the user's line, not at devmod's files
import warnings

import torch
import torch.nn.functional as F

x = torch.randn(3, device="cuda")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    F.mse_loss(x, torch.zeros((), device="cuda"))  # WARN_1: target size differs from input size
    copy = torch.tensor(x)  # WARN_2: copy-constructing from a tensor (a C++ warning)
lines = {n for n, text in enumerate(open(__file__).read().splitlines(), 1) if "# WARN_" in text}
assert len(caught) == 2, [str(w.message) for w in caught]
for warning in caught:
    assert warning.filename == __file__, (warning.filename, str(warning.message))
    assert warning.lineno in lines, (warning.lineno, lines)
