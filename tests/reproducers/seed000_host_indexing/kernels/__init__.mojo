# Seed 000 as reported: one custom op whose execute indexes tensors from host code.
