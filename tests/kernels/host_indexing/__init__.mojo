# A package of custom ops that index tensors from host code (seed 000's mistake).
