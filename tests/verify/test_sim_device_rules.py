"""The simulated cuda:0 follows PyTorch's device rules: what must raise, what must not."""

from __future__ import annotations

import numpy as np
import pytest
from verify_support import MISMATCH, sim  # noqa: F401  (sim is a fixture)

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional


def _gpu(*shape):
    return torch.randn(*shape, device="cuda")


MISMATCHES = {
    "linear: CPU input, GPU weights": lambda: nn.Linear(3, 2).cuda()(torch.randn(4, 3)),
    "linear: GPU input, CPU weights": lambda: nn.Linear(3, 2)(_gpu(4, 3)),
    "conv2d": lambda: nn.Conv2d(1, 2, 3).to("cuda")(torch.randn(1, 1, 5, 5)),
    "embedding: CPU indices": lambda: nn.Embedding(10, 4).cuda()(torch.tensor([1, 2])),
    "cross-entropy with a CPU weight": lambda: nn.CrossEntropyLoss(weight=torch.ones(3))(
        _gpu(4, 3), torch.tensor([0, 1, 2, 0], device="cuda")),
    "BCE with a CPU pos_weight": lambda: nn.BCEWithLogitsLoss(pos_weight=torch.ones(2))(_gpu(4, 2), _gpu(4, 2)),
    "F.mse_loss": lambda: F.mse_loss(_gpu(4, 3), torch.zeros(4, 3)),
    "F.cross_entropy: CPU target": lambda: F.cross_entropy(_gpu(4, 3), torch.tensor([0, 1, 2, 0])),
    "F.linear": lambda: F.linear(_gpu(4, 3), torch.randn(2, 3)),
    "F.conv1d: CPU input": lambda: F.conv1d(torch.randn(1, 2, 8), torch.randn(3, 2, 3, device="cuda")),
    "F.embedding": lambda: F.embedding(torch.tensor([0, 1], device="cuda"), torch.randn(4, 2)),
    "cat": lambda: torch.cat([_gpu(2, 3), torch.randn(2, 3)]),
    "stack": lambda: torch.stack([_gpu(3), torch.randn(3)]),
    "matmul": lambda: _gpu(4, 3) @ torch.randn(3, 2),
    "add": lambda: _gpu(4, 3) + torch.ones(4, 3),
    "add a 1-element 1-D CPU tensor": lambda: _gpu(4) + torch.tensor([1.0]),
    "where": lambda: torch.where(_gpu(3) > 0, _gpu(3), torch.zeros(3)),
    "index_select with CPU index": lambda: _gpu(4, 2).index_select(0, torch.tensor([0, 1])),
    "in-place add into a GPU tensor": lambda: _gpu(3).add_(torch.ones(3)),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
def test_mixing_devices_raises_pytorchs_error(sim, case):
    with pytest.raises(RuntimeError) as caught:
        MISMATCHES[case]()
    # TensorIterator ops say "..., but found at least two devices, cuda:0 and cpu!", ops with a
    # generated check "..., but got mat1 is on cpu, different from ..." (tests/verify/probes pin each).
    assert str(caught.value).startswith("Expected all tensors to be on the same device, but ")


def test_gpu_input_into_cpu_convolution_weights_fails_the_type_check(sim):
    with pytest.raises(RuntimeError, match=r"^Input type \(torch.cuda.FloatTensor\) and weight type "
                                           r"\(torch.FloatTensor\) should be the same$"):
        nn.Conv2d(1, 2, 3)(_gpu(1, 1, 5, 5))


@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN"])
def test_recurrent_hidden_state_on_the_cpu_raises(sim, layer):
    rnn = getattr(nn, layer)(4, 5, batch_first=True).cuda()
    h0 = torch.zeros(1, 2, 5)
    hidden = (h0, torch.zeros(1, 2, 5)) if layer == "LSTM" else h0
    with pytest.raises(RuntimeError, match="Input and hidden tensors are not at the same device, found input "
                                           "tensor at cuda:0 and hidden tensor at cpu"):
        rnn(_gpu(2, 3, 4), hidden)
    good = (h0.cuda(), h0.cuda()) if layer == "LSTM" else h0.cuda()
    assert rnn(_gpu(2, 3, 4), good)[0].is_cuda


def test_recurrent_weights_on_the_cpu_raise(sim):
    with pytest.raises(RuntimeError, match="Input and parameter tensors are not at the same device"):
        nn.GRU(4, 5)(_gpu(3, 2, 4))


def test_gpu_indices_into_a_cpu_tensor_raise(sim):
    table = torch.linspace(0, 1, 10)  # a noise schedule left on the CPU
    steps = torch.randint(0, 10, (4,), device="cuda")
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device as the "
                                           r"indexed tensor \(cpu\)"):
        table[steps]
    table[steps] = 0.0  # assignment accepts them (PyTorch moves the indices)
    assert table[torch.tensor(3, device="cuda")].dim() == 0  # a 0-dim index is an integer


def test_assigning_through_gpu_indices_needs_values_on_the_gpu(sim):
    x = _gpu(5)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x[torch.tensor([0, 1])] = torch.tensor([1.0, 2.0])
    x[0:2] = torch.tensor([1.0, 2.0])  # a slice copies: any device
    x[torch.tensor([0, 1])] = torch.tensor(1.0)  # a 0-dim value is a scalar


def test_allowed_mixes_do_not_raise(sim):
    x = _gpu(4, 3)
    assert (x + torch.tensor(2.0)).is_cuda  # 0-dim CPU tensors are scalars
    assert (x * torch.tensor(2.0) - torch.tensor(1.0)).is_cuda
    assert x[torch.tensor([0, 2])].is_cuda  # CPU (long) indices into a GPU tensor
    assert x[torch.tensor([True, False, True, False])].is_cuda  # a CPU bool mask
    x[torch.tensor([1])] = 0.0
    x[0] = torch.zeros(3)  # assignment copies the value in
    cpu = torch.empty(4, 3)
    assert not cpu.copy_(x).is_cuda  # copies across devices
    assert x.to("cpu").device.type == "cpu" and torch.randn(3).to("cuda").is_cuda
    with pytest.warns(UserWarning, match="copy construct"):  # PyTorch's own advice, also on a GPU
        assert x.new_tensor(torch.ones(2)).is_cuda  # x.new_* follows x whatever its data
    assert torch.zeros(12).view_as(x).device.type == "cpu"  # *_as only read a shape
    assert torch.tensor([x[0, 0], x[1, 1]]).device.type == "cpu"  # torch.tensor reads values


def test_gradients_flow_back_across_a_move(sim):
    leaf = torch.randn(3, requires_grad=True)
    (leaf.to("cuda") * _gpu(3)).sum().backward()
    assert leaf.grad is not None and not leaf.grad.is_cuda  # a gradient lives with its leaf
    gpu_leaf = _gpu(3).requires_grad_()
    (grad,) = torch.autograd.grad((gpu_leaf ** 2).sum(), gpu_leaf)
    assert grad.is_cuda


def test_host_only_calls(sim):
    x = _gpu(2, 2)
    message = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
               "memory first.")
    with pytest.raises(TypeError) as caught:
        x.numpy()
    assert str(caught.value) == message
    with pytest.raises(TypeError, match="can't convert cuda:0"):
        x.detach().numpy()
    with pytest.raises(TypeError, match="can't convert cuda:0"):
        np.asarray(x)
    assert x.cpu().numpy().shape == (2, 2) and x.numpy(force=True).shape == (2, 2)
    with pytest.raises(RuntimeError, match="cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned"):
        x.pin_memory()
    assert torch.ones(2).pin_memory().device.type == "cpu"


def test_printing_and_reading_values_work_on_the_gpu(sim):
    x = torch.tensor([1.5, 2.5], device="cuda")
    assert x[0].item() == 1.5 and x.tolist() == [1.5, 2.5] and float(x.sum()) == 4.0
    assert repr(x) == "tensor([1.5000, 2.5000], device='cuda:0')"
    assert str(x.requires_grad_() * 2).startswith("tensor([3., 5.], device='cuda:0', grad_fn=")
    assert f"{x[0]:.1f}" == "1.5"
