# CuPy computes in the parent, then a multiprocessing Pool (fork, Linux's default) runs workers that use CuPy too:
# the children inherit a CUDA context they cannot use.
import multiprocessing as mp

import cupy as cp


def partial_sum(k):
    x = cp.arange(k * 4096, (k + 1) * 4096, dtype=cp.float64)
    return float((x * x).sum())


if __name__ == "__main__":
    x = cp.arange(1 << 20, dtype=cp.float32)
    print("parent ready, sum", float(x.sum()))
    with mp.Pool(4) as pool:
        print(sum(pool.map(partial_sum, range(8))))
