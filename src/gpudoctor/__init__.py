"""gpudoctor: is this GPU custom-op stack healthy, and if not, what breaks and what to do about it.

The doctor's own process never imports torch or MAX and never initialises CUDA; probes run isolated.
"""

__version__ = "0.1.0"
