# The parent puts a tensor on the GPU, then a multiprocessing Pool (fork, Linux's default) runs workers that use
# CUDA too: a forked child cannot initialise CUDA again.
import multiprocessing as mp

import torch


def score(seed):
    torch.manual_seed(seed)
    x = torch.randn(512, 512, device="cuda")
    return (x @ x.T).trace().item()


if __name__ == "__main__":
    weights = torch.randn(512, 512, device="cuda")
    print("parent ready, norm", weights.norm().item())
    with mp.Pool(4) as pool:
        print(pool.map(score, range(4)))
