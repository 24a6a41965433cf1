"""One ExecuTorch program run through ExecuTorch's own Python runtime, as a Python serving peer
(MLServer, KServe) would serve it: numpy arrays in, numpy arrays out, one call at a time."""

import threading

import numpy as np
import torch
from executorch.runtime import Runtime


class Program:
    def __init__(self, pte_path: str):
        self._method = Runtime.get().load_program(pte_path).load_method("forward")
        # ExecuTorch's Method is not safe to call from two threads at once; the peers' executors
        # may run two requests together.
        self._lock = threading.Lock()

    def forward(self, inputs: list) -> list:
        tensors = [torch.from_numpy(np.ascontiguousarray(x)) for x in inputs]
        with self._lock:
            outputs = self._method.execute(tensors)
        return [o.numpy() for o in outputs]
