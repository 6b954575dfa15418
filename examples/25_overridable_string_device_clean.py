"""Already device-correct, in the style of a script with a configurator: module-level
settings, overridden from the command line (`--device=cpu`) by a loop that keeps each
setting's type. `device = "cuda"` is a string the user replaces, so it must stay a
string, and so must its comparisons. Indices that only slice a NumPy array stay on the
CPU (moving them costs a device sync per element).

devmod must leave this file byte-identical.
"""
# expect-before: clean
import sys

import numpy as np
import torch

device = "cuda"
batch_size = 4
block = 8

# A configurator: `--key=value` replaces a module setting of the same type.
arguments = sys.argv[1:] or ([] if torch.cuda.is_available() else ["--device=cpu"])
for argument in arguments:
    key, value = argument[2:].split("=", 1)
    assert type(value) is type(globals()[key]), f"{key} must stay a {type(globals()[key]).__name__}"
    globals()[key] = value

data = np.arange(1000, dtype=np.int64)


def get_batch():
    ix = torch.randint(len(data) - block, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + block]) for i in ix])
    if device == "cuda":
        x = x.pin_memory().to(device, non_blocking=True)
    else:
        x = x.to(device)
    return x


if __name__ == "__main__":
    print(get_batch().shape, "cuda" in device)
