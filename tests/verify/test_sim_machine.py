"""The simulated machine: torch.cuda, virtual devices through moves, modules, optimizers,
checkpoints, data loading and DataParallel; everything undone on exit."""

from __future__ import annotations

import copy
import io
import warnings

import pytest
from verify_support import REAL_GPU, sim  # noqa: F401  (sim is a fixture)

torch = pytest.importorskip("torch")
nn = torch.nn

from codemods.verify import simulated_cuda  # noqa: E402


def test_torch_cuda_answers_as_one_gpu(sim):
    cuda = torch.cuda
    assert cuda.is_available() and cuda.device_count() == 1 and cuda.current_device() == 0
    cuda.synchronize(), cuda.empty_cache(), cuda.reset_peak_memory_stats()
    cuda.manual_seed(0), cuda.manual_seed_all(0), cuda.set_device(0), cuda.set_device(torch.device("cuda:0"))
    assert isinstance(cuda.get_device_name(0), str) and cuda.get_device_properties(0).total_memory > 0
    assert cuda.memory_allocated() == 0 and cuda.max_memory_allocated() == 0 and cuda.memory_reserved() == 0
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record(), end.record(), end.synchronize()
    assert start.elapsed_time(end) >= 0
    with cuda.device(0), cuda.stream(cuda.Stream()):
        pass
    assert torch.accelerator.is_available() and torch.accelerator.current_accelerator().type == "cuda"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks that a CPU-only machine looks CPU-only again")
def test_everything_is_restored_on_exit_also_after_an_error():
    real = (torch.cuda.is_available, torch.save, torch.load, torch.Tensor.pin_memory, torch.compile,
            torch.Generator, torch.autograd.Variable, torch.cuda.FloatTensor)
    with pytest.raises(ZeroDivisionError):
        with simulated_cuda():
            assert torch.cuda.is_available()
            1 / 0
    assert (torch.cuda.is_available, torch.save, torch.load, torch.Tensor.pin_memory, torch.compile,
            torch.Generator, torch.autograd.Variable, torch.cuda.FloatTensor) == real
    assert "_make_subclass" not in vars(torch.Tensor) and not torch.cuda.is_available()
    assert torch.randn(2).device.type == "cpu" and torch.overrides._get_current_function_mode_stack() == []


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0), 0])
def test_factories_take_every_spelling_of_the_gpu(sim, device):
    for tensor in (torch.zeros(2, device=device), torch.randn(2, 2, device=device), torch.arange(3, device=device),
                   torch.tensor([1, 2], device=device), torch.full((2,), 1.0, device=device)):
        assert tensor.device == torch.device("cuda:0") and tensor.is_cuda and tensor.get_device() == 0
    assert torch.zeros(2).device.type == "cpu" and torch.zeros(2).get_device() == -1


def test_a_second_gpu_does_not_exist(sim):
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.zeros(1, device="cuda:1")


def test_every_to_signature(sim):
    x, gpu = torch.randn(2, 3), torch.zeros(1, device="cuda")
    assert x.to("cuda").is_cuda and x.to(0).is_cuda and x.to(torch.device("cuda")).is_cuda
    assert x.to(gpu).is_cuda and x.to(gpu.double()).dtype == torch.float64
    moved = x.to("cuda", torch.float16, non_blocking=True)
    assert moved.is_cuda and moved.dtype == torch.float16
    assert x.to(device="cuda", dtype=torch.float64, copy=True).is_cuda
    assert moved.to(torch.float32).is_cuda  # a dtype change keeps the device
    assert x.cuda().is_cuda and x.cuda(0).is_cuda and x.cuda(non_blocking=True).is_cuda
    assert not moved.cpu().is_cuda and not moved.to("cpu").is_cuda
    assert x.to(x) is x and x.to("cpu") is x  # no change: the same tensor, as in PyTorch
    copied = moved.to("cuda", copy=True)
    assert copied is not moved and copied.is_cuda
    assert x.type(torch.cuda.FloatTensor).is_cuda and moved.type() == "torch.cuda.HalfTensor"
    assert x.type_as(gpu).is_cuda and x.half().to(gpu).dtype == torch.float32


def test_like_and_new_follow_their_source(sim):
    gpu, cpu = torch.ones(2, device="cuda"), torch.ones(2)
    for make in (torch.zeros_like, torch.ones_like, torch.empty_like, torch.rand_like, torch.randn_like):
        assert make(gpu).is_cuda and not make(cpu).is_cuda
    assert not torch.zeros_like(gpu, device="cpu").is_cuda
    assert gpu.new_zeros(3).is_cuda and gpu.new_ones(3).is_cuda and gpu.new_full((2,), 1.0).is_cuda
    assert gpu.new_empty(2).is_cuda and gpu.new_tensor([1.0]).is_cuda and not cpu.new_zeros(3).is_cuda
    assert torch.ones(2, 2, device="cuda").T.is_cuda and torch.ones(2, 2, device="cuda").mT.is_cuda


def test_modules_move_parameters_buffers_and_gradients(sim):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    model(torch.randn(5, 3)).sum().backward()
    tensors = lambda: [*model.parameters(), *model.buffers(), *(p.grad for p in model.parameters())]  # noqa: E731
    model.cuda()
    assert all(t.is_cuda for t in tensors())
    model.cpu()
    assert not any(t.is_cuda for t in tensors())
    model.to(0)
    assert all(t.is_cuda for t in tensors())
    model.to(torch.zeros(1))
    assert not any(t.is_cuda for t in tensors())
    model.to("cuda", torch.float64)
    assert all(t.is_cuda for t in model.parameters()) and next(model.parameters()).dtype == torch.float64
    model.cpu()
    model.to(device=torch.device("cuda"))  # the keyword form (Pytorch-UNet's train.py)
    assert all(t.is_cuda for t in tensors())
    model.cpu()
    model.to(device="cuda", dtype=torch.float64)
    assert all(t.is_cuda for t in model.parameters())
    clone = copy.deepcopy(model)
    assert all(t.is_cuda for t in [*clone.parameters(), *clone.buffers()])
    assert clone(torch.randn(2, 3, device="cuda", dtype=torch.float64)).is_cuda
    assert all(v.is_cuda for v in model.state_dict().values() if v.dim() > 0)


def test_parameters_and_buffers_made_from_gpu_tensors(sim):
    assert nn.Parameter(torch.zeros(2, device="cuda")).is_cuda
    assert nn.Buffer(torch.zeros(2, device="cuda")).is_cuda
    module = nn.Module()
    module.register_buffer("table", torch.arange(4))
    module.to("cuda")
    assert module.table.is_cuda


@pytest.mark.parametrize("make", [
    lambda params: torch.optim.Adam(params, lr=0.1),
    lambda params: torch.optim.AdamW(params, lr=0.1, foreach=False),
    lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
], ids=["adam", "adamw-for-loop", "sgd-momentum"])
def test_optimizer_state_is_created_where_the_parameters_are(sim, make):
    model = nn.Linear(3, 2).to("cuda")
    optimizer = make(model.parameters())
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randn(4, 3, device="cuda")).pow(2).mean().backward()
        optimizer.step()
        scheduler.step()
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor) and t.dim()]
    assert state and all(t.is_cuda for t in state)
    assert nn.utils.clip_grad_norm_(model.parameters(), 1.0).is_cuda


def test_optimizer_state_loaded_before_the_model_moves_fails_on_step(sim):
    model = nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    saved = copy.deepcopy(optimizer.state_dict())
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(saved)  # the state lands on the CPU, next to the parameters
    model.to("cuda")
    model(torch.randn(4, 3, device="cuda")).sum().backward()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        optimizer.step()


def test_checkpoints_keep_their_device_and_honour_map_location(sim, tmp_path):
    model = nn.Linear(3, 2).cuda()
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    first = lambda state: next(iter(state.values()))  # noqa: E731
    assert first(torch.load(path)).is_cuda  # no map_location: where it was saved, as on a GPU
    assert not first(torch.load(path, map_location="cpu")).is_cuda
    assert not first(torch.load(path, "cpu")).is_cuda
    assert first(torch.load(path, map_location=torch.device("cuda"))).is_cuda
    assert not first(torch.load(path, map_location={"cuda:0": "cpu"})).is_cuda
    assert not first(torch.load(path, map_location=lambda storage, location: storage)).is_cuda
    buffer = io.BytesIO()
    torch.save({"weights": torch.ones(2, device="cuda"), "step": 3}, buffer)
    buffer.seek(0)
    assert torch.load(buffer)["weights"].is_cuda
    cpu_path = tmp_path / "cpu.pt"
    torch.save(nn.Linear(3, 2).state_dict(), cpu_path)
    assert not first(torch.load(cpu_path)).is_cuda
    assert first(torch.load(cpu_path, map_location="cuda")).is_cuda
    whole = tmp_path / "whole.pt"
    torch.save(model, whole)
    assert next(torch.load(whole, weights_only=False).parameters()).is_cuda


def test_dataloader_pins_without_warnings_and_yields_cpu_batches(sim):
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.randn(16, 3), torch.arange(16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for workers in (0, 2):
            batches = list(DataLoader(data, batch_size=4, pin_memory=True, num_workers=workers))
            assert len(batches) == 4 and not any(t.is_cuda for batch in batches for t in batch)


def test_tensor_dataset_rows_keep_their_device(sim):
    """TensorDataset's rows are cut past the mode when its tensors are plain CPU ones: same result."""
    from torch.utils.data import TensorDataset

    on_cpu = TensorDataset(torch.randn(8, 3), torch.arange(8))
    row, label = on_cpu[2]
    assert row.device.type == "cpu" and label.device.type == "cpu" and int(label) == 2
    mixed = TensorDataset(torch.randn(8, 3, device="cuda"), torch.arange(8))
    assert [t.device.type for t in mixed[1]] == ["cuda", "cpu"]
    assert [t.device.type for t in on_cpu[1:3]] == ["cpu", "cpu"]  # a slice takes the ordinary route
    with pytest.raises(RuntimeError, match="indices should be either on cpu"):
        on_cpu[torch.tensor([0, 1], device="cuda")]


def test_tensor_dataset_is_restored_on_exit():
    from torch.utils.data import TensorDataset

    real = TensorDataset.__getitem__
    with simulated_cuda():
        assert TensorDataset.__getitem__ is not real
    assert TensorDataset.__getitem__ is real


def test_gpu_tensors_from_a_dataset_cannot_be_pinned(sim):
    from torch.utils.data import DataLoader

    class OnTheGpu(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            return torch.ones(2, device="cuda")

    with pytest.raises(RuntimeError, match="cannot pin 'torch.cuda.FloatTensor'"):
        list(DataLoader(OnTheGpu(), batch_size=2, pin_memory=True))


def test_dataparallel_on_one_simulated_gpu(sim):
    model = nn.DataParallel(nn.Linear(3, 2))  # moves the module to cuda:0, as on one GPU
    assert next(model.parameters()).is_cuda
    assert model(torch.randn(4, 3)).is_cuda  # its scatter moves the input
    model.module.cpu()
    with pytest.raises(RuntimeError, match="module must have its parameters and buffers on device cuda:0"):
        model(torch.randn(4, 3))


def test_default_devices(sim):
    with torch.device("cuda"):
        assert torch.zeros(2).is_cuda and nn.Linear(2, 2).weight.is_cuda
    torch.set_default_device("cuda")
    try:
        assert torch.zeros(2).is_cuda and torch.get_default_device() == torch.device("cuda:0")
    finally:
        torch.set_default_device(None)
    assert not torch.zeros(2).is_cuda
    if sim is not None:  # deprecated; on a real GPU it would leave CUDA the default for later tests
        with pytest.warns(UserWarning, match="deprecated"):
            torch.set_default_tensor_type(torch.cuda.FloatTensor)
        try:
            assert torch.zeros(2).is_cuda and torch.zeros(2).dtype == torch.float32
        finally:
            torch.set_default_tensor_type(torch.FloatTensor)
        assert not torch.zeros(2).is_cuda


def test_legacy_idioms(sim):
    from torch.autograd import Variable

    Tensor = torch.cuda.FloatTensor
    valid = Variable(Tensor(4, 1).fill_(1.0), requires_grad=False)
    assert valid.is_cuda and isinstance(valid, Tensor) and isinstance(valid, Variable)
    assert not isinstance(torch.ones(1), Tensor)
    assert torch.cuda.LongTensor([1, 2]).is_cuda


def test_other_entry_points(sim):
    generator = torch.Generator(device="cuda").manual_seed(0)
    assert isinstance(generator, torch.Generator)
    assert torch.randn(2, generator=generator, device="cuda").is_cuda
    if sim is not None:  # (a real GPU would spend its time compiling)
        compiled = torch.compile(nn.Linear(2, 2).cuda())  # runs eagerly under the simulation
        assert compiled(torch.ones(1, 2, device="cuda")).is_cuda
    a, b = torch.zeros(2, device="cuda"), torch.zeros(2)
    torch.utils.swap_tensors(a, b)
    assert not a.is_cuda and b.is_cuda
    scaler = torch.amp.GradScaler("cuda")
    model = nn.Linear(2, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.autocast("cuda"):
        loss = model(torch.ones(3, 2, device="cuda")).float().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def test_packed_sequences_keep_their_lengths_on_the_cpu(sim):
    pack, pad = nn.utils.rnn.pack_padded_sequence, nn.utils.rnn.pad_packed_sequence
    lstm = nn.LSTM(4, 5, batch_first=True).cuda()
    packed = pack(torch.randn(2, 3, 4, device="cuda"), torch.tensor([2, 3]), batch_first=True, enforce_sorted=False)
    output, _ = lstm(packed)
    padded, lengths = pad(output, batch_first=True)
    assert padded.is_cuda and not lengths.is_cuda and not output.batch_sizes.is_cuda
    with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 tensor"):
        pack(torch.randn(2, 3, 4, device="cuda"), torch.tensor([3, 2], device="cuda"), batch_first=True)


def test_param_devices_record_where_the_model_worked():
    with simulated_cuda() as gpu_run:
        nn.Linear(3, 2).cuda()(torch.randn(1, 3, device="cuda"))
    with simulated_cuda() as cpu_run:
        nn.Linear(3, 2)(torch.randn(1, 3))
    with simulated_cuda() as idle:
        nn.Linear(3, 2).cuda()  # built and moved, never used
    assert gpu_run.stats.param_devices == {"cuda:0"}
    assert cpu_run.stats.param_devices == {"cpu"}
    assert idle.stats.param_devices == set()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # TorchScript's own deprecation notices
def test_torchscript_results_follow_their_inputs(sim):
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    scripted = torch.jit.script(double)
    gpu = torch.ones(3, device="cuda")
    assert scripted(gpu).is_cuda and (scripted(gpu) + gpu).is_cuda and "def double" in scripted.code
    traced = torch.jit.trace(nn.Linear(3, 2).cuda(), gpu)
    assert traced(gpu).is_cuda
    module = torch.jit.script(nn.Linear(3, 2)).cuda()
    assert module(gpu).is_cuda


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_scripted_function_may_call_a_python_function_of_torch(sim):
    # ddpm-torch (run 40): ``@torch.jit.script`` over ``F.pad(x, [0, 1])`` failed at import under the
    # simulation ("Argument mode not provided"): TorchScript compiled F.pad through the patched script.
    def widen(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, [0, 1])

    scripted = torch.jit.script(widen)
    assert scripted(torch.ones(2, 3, device="cuda")).shape == (2, 4)
    assert scripted(torch.ones(2, 3, device="cuda")).is_cuda


def test_a_nested_simulation_is_the_active_one():
    with simulated_cuda() as outer, simulated_cuda() as inner:
        assert inner is outer and torch.zeros(1, device="cuda").is_cuda
    assert not torch.cuda.is_available() or REAL_GPU


def test_module_to_a_dtype_alone_converts_the_parameters(sim):
    # Module.to(torch.float16) calls t.to(None, torch.float16, False) on every tensor (found running
    # torch_ema's test suite under --simulate-cuda).
    model = torch.nn.Linear(3, 2).to(torch.float16)
    assert model.weight.dtype == torch.float16
    model = torch.nn.Linear(3, 2).cuda().to(torch.float64)
    assert model.weight.dtype == torch.float64 and model.weight.device.type == "cuda"


def test_cuda_autocast_lowers_the_precision_as_on_a_gpu(sim):
    # Code that casts back to float32 inside autocast and feeds a half-precision layer relies on
    # autocast casting the layer's inputs (found running vector-quantize-pytorch's tests).
    layer = torch.nn.Linear(4, 4).cuda().half()
    with torch.autocast("cuda", dtype=torch.float16):
        out = layer(torch.randn(2, 4, device="cuda"))
    assert out.dtype == torch.float16 and out.device.type == "cuda"


def test_reentrant_checkpointing_runs_its_backward(sim):
    # Memory-efficient DenseNets: checkpoint(..., use_reentrant=True) reads Variable._execution_engine
    # in its backward (found by the eighth held-out trial, efficient_densenet_pytorch).
    import torch.utils.checkpoint as checkpoint

    layer = torch.nn.Linear(4, 4).cuda()
    x = torch.randn(2, 4, device="cuda", requires_grad=True)
    y = checkpoint.checkpoint(lambda t: torch.relu(layer(t)), x, use_reentrant=True)
    y.sum().backward()
    assert x.grad is not None and x.grad.device.type == "cuda"


def test_as_tensor_of_a_tensor_elsewhere_copies_it_there(sim):
    # segment-anything MaskData.filter: ``v[torch.as_tensor(keep, device=v.device)]`` with ``keep`` on
    # the GPU and ``v`` on the CPU; on real CUDA that is ``keep.to("cpu")`` and the index works.
    v = torch.arange(5)
    keep = torch.tensor([True, False, True, False, True], device="cuda")
    for make in (torch.as_tensor, torch.asarray):
        index = make(keep, device=v.device)
        assert index.device.type == "cpu" and keep.device.type == "cuda"
        assert v[index].tolist() == [0, 2, 4]
    assert torch.as_tensor(torch.ones(2), device="cuda").device.type == "cuda"
    assert torch.as_tensor(keep).device.type == "cuda"
