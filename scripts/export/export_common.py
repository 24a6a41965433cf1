"""Pieces shared by export_models.py (CPU programs) and export_cuda.py (CUDA programs).

Nothing here imports ExecuTorch's runtime (executorch.runtime, its _C extension): the CUDA
export runs next to a torch whose version that extension does not load against.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from executorch.exir._serialize._program import deserialize_pte_binary
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult

# Open Inference Protocol datatype names.
PROTOCOL_DATATYPE = {
    torch.bool: "BOOL",
    torch.uint8: "UINT8",
    torch.int8: "INT8",
    torch.int16: "INT16",
    torch.int32: "INT32",
    torch.int64: "INT64",
    torch.float16: "FP16",
    torch.bfloat16: "BF16",
    torch.float32: "FP32",
    torch.float64: "FP64",
}
FLOAT_DTYPES = {torch.float16, torch.bfloat16, torch.float32, torch.float64}

PROBE_BACKEND_ID = "CallerStreamProbe"
PROBE_PAYLOAD = b"CallerStreamProbe-v1"
# A probe partition inside a larger program (native/testing/caller_stream_probe): inputs hold
# one float32 tensor x, outputs are y = -x (as many elements) and the int64[3] it observed.
PROBE_STAGE_PAYLOAD = b"CallerStreamProbe-stage-v1"
PROBE_MODE_SPEC_KEY = "mode"
PROBE_STAGE_MODE = b"stage"


class CallerStreamProbe(BackendDetails):
    """Test-only backend. Its native delegate (in the test build) reports what caller
    stream it observed; ahead of time it needs nothing but a recognisable payload.
    The class name is the backend id, so it must stay exactly this."""

    @staticmethod
    def preprocess(edge_program, compile_specs) -> PreprocessResult:
        stage = any(s.key == PROBE_MODE_SPEC_KEY and s.value == PROBE_STAGE_MODE for s in compile_specs)
        return PreprocessResult(processed_bytes=PROBE_STAGE_PAYLOAD if stage else PROBE_PAYLOAD)


class SeededMlp(nn.Module):
    """An MLP whose weights are drawn from a fixed seed (the served demo keeps its own)."""

    def __init__(self, seed: int, sizes: Sequence[int]) -> None:
        super().__init__()
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def seeded_inputs(seed: int, *shapes: Sequence[int]) -> list[tuple[torch.Tensor, ...]]:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=gen),) for shape in shapes]


def grid_values(generator: torch.Generator, shape: Sequence[int]) -> torch.Tensor:
    """Normal samples snapped to multiples of 1/64: exact in float32 and short in JSON."""
    return torch.round(torch.randn(*shape, generator=generator) * 64) / 64


def calibrate_batchnorm(model: nn.Module, seed: int, *batch_shapes: Sequence[int]) -> nn.Module:
    """Random init alone leaves BatchNorm at identity and a deep CNN's logits near 1e-9;
    running statistics averaged over seeded batches give activations (and references) of
    ordinary size. Returns the model in eval mode."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # cumulative average over the calibration batches
            m.reset_running_stats()
    model.train()
    with torch.no_grad():
        for (batch,) in seeded_inputs(seed, *batch_shapes):
            model(batch)
    return model.eval()


def tensor_json(name: str, tensor: torch.Tensor) -> dict:
    values = tensor.detach().cpu()
    if values.dtype in (torch.float16, torch.bfloat16):
        values = values.float()  # every half value is exact in float32 and in JSON
    return {
        "name": name,
        "datatype": PROTOCOL_DATATYPE[tensor.dtype],
        "shape": list(tensor.shape),
        "data": values.flatten().tolist(),
    }


def as_tuple(outputs) -> tuple[torch.Tensor, ...]:
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def inspect_method(pte: bytes, method: str) -> tuple[list[str], list[tuple[str, bytes]]]:
    """Operators the method calls outside delegates, and the (backend id, payload)
    of every delegate it calls, read back from the serialized program."""
    program = deserialize_pte_binary(pte).program  # inlines delegate segments
    plans = [p for p in program.execution_plan if p.name == method]
    if len(plans) != 1:
        raise SystemExit(f"expected one method {method!r}, found {[p.name for p in program.execution_plan]}")
    operators = [f"{op.name}.{op.overload}" for op in plans[0].operators]
    delegates = [
        (d.id, bytes(program.backend_delegate_data[d.processed.index].data))
        for d in plans[0].delegates
    ]
    return operators, delegates
