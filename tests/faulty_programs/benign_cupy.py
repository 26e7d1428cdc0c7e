# A correct CuPy computation, then a version check written as a string comparison: "14.2.0" >= "9.0" is False for
# strings, so the program's own assertion fails although CuPy is new enough. Nothing on the GPU is wrong.
import cupy as cp

x = cp.linspace(0.0, 1.0, 1 << 20, dtype=cp.float32)
y = cp.sqrt(x) * 2
print("mean", float(y.mean()))
assert cp.__version__ >= "9.0", f"this script needs CuPy 9.0 or newer, found {cp.__version__}"
print("ok")
