"""`is_device_error` knows every device message real CUDA raises, so `verify` on a GPU exits 3 (not 1)
for them, and each gets a hint that fits it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from codemods.verify.diagnose import diagnose, is_device_error  # noqa: E402

# Worded as PyTorch 2.x raises them on a CUDA machine (ATen's own strings).
REAL_CUDA_MESSAGES = [
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
    "Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on "
    "cuda:0 (when checking argument in method wrapper_CUDA_addmm)",
    "Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!",
    "invalid gradient at index 0 - expected device cuda:0 but got cpu",
    "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0",
    "Expected a 'cuda' device type for generator but found 'cpu'",
    "Tensors of the same index must be on the same device and the same dtype except `step` tensors that can be "
    "CPU and float32/64, and optimizer states that can be bfloat16 for mixed-precision training",
    "'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor",
    "Input and hidden tensors are not at the same device, found input tensor at cuda:0 and hidden tensor at cpu",
    "indices should be either on cpu or on the same device as the indexed tensor (cpu)",
    "Expected tensor for argument #1 'input' to have the same device as tensor for argument #2 'weight'; "
    "but device 0 does not equal 1 (while checking arguments for cudnn_convolution)",
    "Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments for addmm)",
    "attempting to assign a gradient with device type 'cpu' to a tensor with device type 'cuda'. Please ensure "
    "that the gradient and the tensor are on the same device",
    "attempting to assign a gradient located on device with index '1' to a tensor located on device with index "
    "'0'. Please ensure that the gradient and the tensor are on the same device",
]
NOT_DEVICE_ERRORS = [
    "mat1 and mat2 shapes cannot be multiplied (4x3 and 2x2)",
    "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
    "but got torch.FloatTensor instead (while checking arguments for embedding)",
    "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0",
]


@pytest.mark.parametrize("message", REAL_CUDA_MESSAGES)
def test_real_cuda_device_messages_are_device_errors(message):
    assert is_device_error(RuntimeError(message))


@pytest.mark.parametrize("message", NOT_DEVICE_ERRORS)
def test_other_errors_are_not(message):
    assert not is_device_error(RuntimeError(message))


def _hint(message: str) -> str:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return diagnose(exc, lambda tensor: "cpu").why


def test_two_gpus_are_not_blamed_on_a_missing_device_argument():
    why = _hint("Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!")
    assert "two different GPUs (cuda:0 and cuda:1)" in why and "device=" not in why.split(":")[0]
    assert "without `device=`" not in why


def test_checksamegpu_names_its_two_gpus():
    why = _hint("Expected tensor for argument #1 'input' to have the same device as tensor for argument #2 "
                "'weight'; but device 0 does not equal 1 (while checking arguments for cudnn_convolution)")
    assert "two different GPUs (cuda:0 and cuda:1)" in why and "device=" not in why


@pytest.mark.parametrize("message, needle", [
    ("invalid gradient at index 0 - expected device cuda:0 but got cpu", "backward()"),
    ("Expected a 'cuda' device type for generator but found 'cpu'", "torch.Generator(device=device)"),
    ("expected self and mask to be on the same device, but got mask on cpu and self on cuda:0", "mask"),
])
def test_each_message_gets_its_own_hint(message, needle):
    assert needle in _hint(message)
