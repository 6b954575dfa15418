# expect: ok
# rule: a multiprocessing child started with the spawn method sees the GPU too (it inherits the environment)
import multiprocessing


def device_name(_: int) -> str:
    import torch

    return str(torch.ones(2, device="cuda").device)


if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        names = pool.map(device_name, [0])
    assert names == ["cuda:0"], names
