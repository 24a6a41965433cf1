#!/usr/bin/env python3
"""Exports programs for ExecuTorch's CUDA backend, with references from PyTorch eager on the GPU.

    export_cuda.py --out DIR [--cuda-payload manifest|blob | --cuda-delegate DIR]
                   [--cuda-autotune on|off] [--only NAME ...]
    export_cuda.py --self-test          (CPU only: everything but the CUDA compile and the GPU)

CudaPartitioner hands the graph to AOTInductor, which compiles Triton kernels on the GPU into a
shared object that rides in model.pte; the weights go to aoti_cuda_blob.ptd. Each model lands in
DIR/<name>/: config.yml and 1/{model.pte, aoti_cuda_blob.ptd, reference.json, eager.json,
export.json}. The references are the eager module's outputs on the same GPU; the exported program
is never run here (ExecuTorch's Python runtime links another libtorch than the CUDA host's), the
service checks it against them.

Needs torch with CUDA, executorch 1.5.1 and torchvision (scripts/export/cuda-wheels.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import statistics
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from executorch.backends.aoti.aoti_backend import AotiBackend
from executorch.backends.cuda.cuda_backend import CudaBackend
from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
from executorch.exir import EdgeCompileConfig, schema, to_edge_transform_and_lower
from executorch.exir._serialize._program import deserialize_pte_binary
from executorch.exir.backend.backend_details import BackendDetails
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.delegate import executorch_call_delegate

from export_common import (
    PROBE_BACKEND_ID,
    PROBE_MODE_SPEC_KEY,
    PROBE_STAGE_MODE,
    PROBE_STAGE_PAYLOAD,
    CallerStreamProbe,  # noqa: F401 (registers the probe backend by its class name)
    SeededMlp,
    as_tuple,
    calibrate_batchnorm,
    grid_values,
    tensor_json,
)

MODEL_NAMES = ("cuda-mlp", "mixed-probe-cuda", "cuda-encoder", "cuda-resnet18")
CUDA_BACKEND_ID = "CudaBackend"
PAYLOAD_FORMATS = ("manifest", "blob")
# CudaWeightCollector's per-weight manifest (executorch 1.5.1, cuda_weight_collector.py).
MANIFEST_MAGIC = b"ETCUDAFQN3"
# AotiBackend.preprocess's payload: "<sha256>_so_blob\n<sha256>_weights_blob".
BLOB_PAYLOAD = re.compile(rb"[0-9a-f]{64}_so_blob\n[0-9a-f]{64}_weights_blob")
# With --cuda-autotune off, GEMM and convolution templates keep this many candidates.
OFF_GEMM_CANDIDATES = 4
AUTOTUNE_MEANING = {
    "on": "on (the backend's max_autotune: every GEMM/convolution template candidate benchmarked, "
          "wider pointwise and reduction configs; coordinate descent off)",
    "off": f"off (max_autotune compile spec OFF; GEMM/convolution still Triton templates, "
           f"{OFF_GEMM_CANDIDATES} candidates each; pointwise and reductions by heuristics; coordinate descent off)",
}

# rtol: what the service checks. atol only matters for elements near zero: the same float32
# network summed in another order (Triton templates against cuBLAS/cuDNN) is expected to differ
# by 1e-6 to 1e-5 at these depths (ResNet-18: 20 layers, sums of up to 4608 products), and the
# outputs are 0.1 to a few units, so 1e-4 still fails a wrong kernel. export.json records the
# eager GPU-to-CPU distance of every model, a measured check of that expectation.
TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}
EAGER_WARMUP_CALLS = 20
EAGER_TIMED_CALLS = 200


def log(message: str) -> None:
    print(f"[export-cuda] {message}", file=sys.stderr, flush=True)


# --- Models ----------------------------------------------------------------------------------


class EncoderBlock(nn.Module):
    """nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0, batch_first=True) in eval,
    written out with F.scaled_dot_product_attention: post-norm, ReLU feed-forward."""

    def __init__(self, d_model: int = 256, heads: int = 4, ffn: int = 1024) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, ffn)
        self.ff2 = nn.Linear(ffn, d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, n, d = tokens.shape
        # [B, N, 3, H, Dh] -> three [B, H, N, Dh]: q, k, v in the rows order of in_proj_weight.
        q, k, v = self.qkv(tokens).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attention = F.scaled_dot_product_attention(q, k, v)
        x = self.norm1(tokens + self.out(attention.transpose(1, 2).reshape(b, n, d)))
        return self.norm2(x + self.ff2(F.relu(self.ff1(x))))

    @staticmethod
    def from_layer(layer: nn.TransformerEncoderLayer) -> "EncoderBlock":
        block = EncoderBlock(layer.linear1.in_features, layer.self_attn.num_heads, layer.linear1.out_features)
        pairs = [
            (block.qkv.weight, layer.self_attn.in_proj_weight), (block.qkv.bias, layer.self_attn.in_proj_bias),
            (block.out.weight, layer.self_attn.out_proj.weight), (block.out.bias, layer.self_attn.out_proj.bias),
            (block.norm1.weight, layer.norm1.weight), (block.norm1.bias, layer.norm1.bias),
            (block.ff1.weight, layer.linear1.weight), (block.ff1.bias, layer.linear1.bias),
            (block.ff2.weight, layer.linear2.weight), (block.ff2.bias, layer.linear2.bias),
            (block.norm2.weight, layer.norm2.weight), (block.norm2.bias, layer.norm2.bias),
        ]
        with torch.no_grad():
            for mine, theirs in pairs:
                mine.copy_(theirs)
        return block.eval()


def seeded_encoder_layer(seed: int) -> nn.TransformerEncoderLayer:
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    # The library zeroes the attention biases and starts LayerNorm at identity; draw them too,
    # so that every parameter the program reads changes its output.
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return layer.eval()


class MixedProbeCuda(nn.Module):
    """Probe partition, CUDA partition, probe partition. The probe stages (CallerStreamProbe,
    stage mode) compute neg and report the stream they observed; the MLP runs on CUDA."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = SeededMlp(21, [64, 128, 64])

    def forward(self, x: torch.Tensor):
        a = torch.neg(x)
        obs_a = x[0, :3].to(torch.int64)
        h = self.mlp(a)
        c = torch.neg(h)
        obs_b = h[0, :3].to(torch.int64)
        return c, obs_a, obs_b


@dataclass
class CudaSpec:
    name: str
    module: nn.Module  # on the CPU, eval mode; torch.export traces this one
    input_names: list[str]
    output_names: list[str]
    cases: list[tuple[torch.Tensor, ...]]
    export_example: tuple[torch.Tensor, ...] | None = None  # default: cases[0]
    dynamic_shapes: object = None
    # config.yml: `dims` per input where a dimension varies, dynamic batching, placement.
    input_dims: dict[str, list[int]] = field(default_factory=dict)
    dynamic_batching: dict[str, object] | None = None
    placement: str | None = None
    instances: int = 1
    # Outputs whose values PyTorch cannot know (what a probe observed): written, not compared.
    not_compared: set[str] = field(default_factory=set)
    # Mixed programs: the submodule that goes to CUDA; the nodes before and after it become
    # two CallerStreamProbe stage delegates.
    cuda_submodule: str | None = None


def grid_cases(seed: int, *shapes: Sequence[int]) -> list[tuple[torch.Tensor, ...]]:
    """Distinct seeded inputs on a 1/64 grid (exact in float32, short in JSON)."""
    gen = torch.Generator().manual_seed(seed)
    return [(grid_values(gen, shape),) for shape in shapes]


def cuda_mlp_spec() -> CudaSpec:
    batch = torch.export.Dim("batch", min=1, max=32)
    return CudaSpec(
        "cuda-mlp",
        SeededMlp(17, [64, 256, 64]).eval(),
        ["x"],
        ["y"],
        grid_cases(170, (1, 64), (3, 64), (32, 64)),
        # An example above 1 row, or torch.export specializes the batch dimension.
        export_example=grid_cases(171, (4, 64))[0],
        dynamic_shapes=({0: batch},),
        input_dims={"x": [-1, 64]},
        dynamic_batching={"max-batch-size": 32, "max-queue-delay": "500us"},
    )


def cuda_resnet18_spec() -> CudaSpec:
    import torchvision  # export-only dependency

    torch.manual_seed(18)
    model = torchvision.models.resnet18(weights=None)
    model = calibrate_batchnorm(model, 181, (8, 3, 224, 224), (8, 3, 224, 224))
    return CudaSpec(
        "cuda-resnet18",
        model,
        ["image"],
        ["logits"],
        grid_cases(180, (1, 3, 224, 224), (1, 3, 224, 224)),
    )


def cuda_encoder_spec() -> CudaSpec:
    return CudaSpec(
        "cuda-encoder",
        EncoderBlock.from_layer(seeded_encoder_layer(19)),
        ["tokens"],
        ["hidden"],
        grid_cases(190, (1, 128, 256), (1, 128, 256)),
    )


def mixed_probe_cuda_spec() -> CudaSpec:
    return CudaSpec(
        "mixed-probe-cuda",
        MixedProbeCuda().eval(),
        ["x"],
        ["y", "observed_before", "observed_after"],
        # 64 distinct cases: a service that cycles through them shows a stale read as a wrong value.
        grid_cases(210, *[(1, 64)] * 64),
        placement="gpu",
        not_compared={"observed_before", "observed_after"},
        cuda_submodule="mlp",
    )


SPEC_BUILDERS: dict[str, Callable[[], CudaSpec]] = {
    "cuda-mlp": cuda_mlp_spec,
    "cuda-resnet18": cuda_resnet18_spec,
    "cuda-encoder": cuda_encoder_spec,
    "mixed-probe-cuda": mixed_probe_cuda_spec,
}


# --- Partitioning ----------------------------------------------------------------------------


def in_submodule(node: torch.fx.Node, path: str) -> bool:
    """Whether torch.export recorded the node as computed inside module `path`."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = [entry[0] for entry in stack.values()]
    return any(p == path or p.startswith(path + ".") for p in paths)


class ProbeStagePartitioner(Partitioner):
    """Tags what runs before the CUDA submodule as one CallerStreamProbe stage delegate and what
    runs after it as another; the CUDA partitioner, which comes next, takes what is left (it only
    considers nodes that no delegate owns yet)."""

    TAGS = ("probe_before", "probe_after")

    def __init__(self, cuda_submodule: str) -> None:
        super().__init__()
        self.cuda_submodule = cuda_submodule
        self.delegation_spec = DelegationSpec(PROBE_BACKEND_ID, [CompileSpec(PROBE_MODE_SPEC_KEY, PROBE_STAGE_MODE)])

    def partition(self, exported_program: torch.export.ExportedProgram) -> PartitionResult:
        nodes = [n for n in exported_program.graph.nodes if n.op == "call_function"]
        cuda = {n for n in nodes if in_submodule(n, self.cuda_submodule)}
        if not cuda:
            raise SystemExit(f"no node of submodule {self.cuda_submodule!r} in the graph (nn_module_stack lost?)")
        after: set[torch.fx.Node] = set()
        for node in nodes:  # topological order: a node is after if one of its inputs is
            if node not in cuda and any(i in cuda or i in after for i in node.all_input_nodes):
                after.add(node)
        before = [n for n in nodes if n not in cuda and n not in after]
        for tag, stage in zip(self.TAGS, (before, sorted(after, key=nodes.index))):
            if not stage:
                raise SystemExit(f"the {tag} stage around {self.cuda_submodule!r} is empty")
            for node in stage:
                node.meta["delegation_tag"] = tag
        # No constant is tagged: a probe stage must not own weights (it never reads them).
        return PartitionResult(exported_program, {tag: self.delegation_spec for tag in self.TAGS})

    def ops_to_not_decompose(self, ep):
        # Keep every op, as AotiPartitioner does: the CUDA partition then sees the same graph
        # it would see without the probe stages in front of it.
        ops = {n.target for n in ep.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)}
        return list(ops), None


def cuda_compile_specs(autotune: str) -> list[CompileSpec]:
    return [
        CudaBackend.generate_method_name_compile_spec("forward"),
        # ON (the backend's default): GEMM, convolution and pointwise kernels all autotuned.
        CompileSpec("max_autotune", b"ON" if autotune == "on" else b"OFF"),
        # The Triton SDPA that "ON" substitutes takes bfloat16 only; these programs are float32,
        # so SDPA is decomposed (MATH backend) and compiled by Inductor like the rest.
        CompileSpec("triton_kernel_mode", b"OFF"),
    ]


@contextlib.contextmanager
def inductor_settings(autotune: str):
    """Inductor configuration for the compile. The delegate has no cuBLAS or cuDNN fallback, so
    matrix products and convolutions must become Triton templates, which Inductor only emits
    under max_autotune or max_autotune_gemm: 'off' keeps the latter with a few candidates."""
    from torch._inductor import config as inductor_config

    patches: dict[str, object] = {"coordinate_descent_tuning": False}
    if autotune == "off":
        patches["max_autotune_gemm"] = True
        patches["test_configs.max_mm_configs"] = OFF_GEMM_CANDIDATES
    with inductor_config.patch(patches):
        yield


_CUDA_BACKEND_OVERRIDES = ("preprocess", "preprocess_multimethod", "_weights_format")


@contextlib.contextmanager
def cuda_payload_format(payload: str):
    """'manifest': executorch 1.5.1's CudaBackend as it is (per-weight ETCUDAFQN3 manifest).
    'blob': the payload that older delegates read, "<so key>\\n<weights key>" with one dense
    weights blob. 1.5.1 offers no switch (its _weights_format ignores the compile specs, a
    subclass of a backend is refused by BackendDetails.__init_subclass__, and its preprocess
    always runs the manifest collector), so for the duration of the lowering CudaBackend takes
    the generic AOTI path instead: AotiBackend.preprocess (what MetalBackend uses), the default
    per-partition preprocess_multimethod, and Inductor's "binary_blob" constants format. That is
    exactly the exporter of the 22 August upstream tree (same AotiBackend, same compile options),
    whose CudaBackend had neither override and chose "binary_blob" outside low-memory mode."""
    if payload == "manifest":
        yield
        return
    saved = {name: CudaBackend.__dict__[name] for name in _CUDA_BACKEND_OVERRIDES}
    CudaBackend.preprocess = AotiBackend.__dict__["preprocess"]
    CudaBackend.preprocess_multimethod = BackendDetails.__dict__["preprocess_multimethod"]
    CudaBackend._weights_format = classmethod(lambda cls, compile_specs: "binary_blob")
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(CudaBackend, name, value)


# --- Checking a lowered program --------------------------------------------------------------


@dataclass
class ProgramFacts:
    sequence: list[str]  # the method's chain: "delegate:<id>" and "kernel:<op>", in order
    delegates: list[tuple[str, bytes]]  # (backend id, payload), in chain order
    io_devices: list[str]  # device of every method input and output
    constant_delegate_args: dict[int, int]  # chain position of a delegate -> constants it takes


def read_program(pte: bytes) -> ProgramFacts:
    program = deserialize_pte_binary(pte).program
    (plan,) = [p for p in program.execution_plan if p.name == "forward"]
    sequence, delegates, constants = [], [], {}
    for instruction in plan.chains[0].instructions:
        args = instruction.instr_args
        if isinstance(args, schema.DelegateCall):
            delegate = plan.delegates[args.delegate_index]
            payload = bytes(program.backend_delegate_data[delegate.processed.index].data)
            constants[len(sequence)] = sum(is_constant(plan.values[i].val) for i in args.args)
            sequence.append(f"delegate:{delegate.id}")
            delegates.append((delegate.id, payload))
        elif isinstance(args, schema.KernelCall):
            op = plan.operators[args.op_index]
            sequence.append(f"kernel:{op.name}" + (f".{op.overload}" if op.overload else ""))
    io_devices = [tensor_device(plan.values[i].val) for i in [*plan.inputs, *plan.outputs]]
    return ProgramFacts(sequence, delegates, io_devices, constants)


def is_constant(value) -> bool:
    if not isinstance(value, schema.Tensor):
        return False
    external = value.extra_tensor_info is not None and value.extra_tensor_info.location == schema.TensorDataLocation.EXTERNAL
    return value.data_buffer_idx != 0 or external


def tensor_device(value) -> str:
    if not isinstance(value, schema.Tensor):
        return "not a tensor"
    info = value.extra_tensor_info
    return (info.device_type if info is not None else schema.DeviceType.CPU).name


def check_program(spec: CudaSpec, pte: bytes, edge_program, cuda_id: str, payload: str | None) -> ProgramFacts:
    """Fails unless the program is what the service expects: CPU tensors in and out, the CUDA
    delegate framed by host-device copies, probe stages where the spec has them, and a payload
    of the requested format. payload None: a stand-in CUDA delegate (no payload to check)."""
    facts = read_program(pte)
    where = f"{spec.name}:"
    order = [d for d, _ in facts.delegates]
    expected = [PROBE_BACKEND_ID, cuda_id, PROBE_BACKEND_ID] if spec.cuda_submodule else [cuda_id]
    if order != expected:
        raise SystemExit(f"{where} delegates {order}, expected {expected} ({facts.sequence})")
    if any(device != "CPU" for device in facts.io_devices):
        raise SystemExit(f"{where} method inputs/outputs on {facts.io_devices}: the service passes host tensors")
    kernels = {s for s in facts.sequence if s.startswith("kernel:")}
    stray = {k for k in kernels if not k.startswith(("kernel:et_copy::", "kernel:executorch_prim::", "kernel:aten::sym_size"))}
    if stray:
        raise SystemExit(f"{where} operators outside every delegate: {sorted(stray)}")
    at = facts.sequence.index(f"delegate:{cuda_id}")
    copies_in = [s for s in facts.sequence[:at] if s.startswith("kernel:et_copy::_h2d_copy")]
    copies_out = [s for s in facts.sequence[at:] if s.startswith("kernel:et_copy::_d2h_copy")]
    if not copies_in or not copies_out:
        raise SystemExit(f"{where} no host-to-device copy before or device-to-host copy after the CUDA delegate: {facts.sequence}")
    for (backend, data), position in zip(facts.delegates, [i for i, s in enumerate(facts.sequence) if s.startswith("delegate:")]):
        if backend == PROBE_BACKEND_ID:
            if data != PROBE_STAGE_PAYLOAD:
                raise SystemExit(f"{where} probe payload {data!r}, expected {PROBE_STAGE_PAYLOAD!r}")
            if facts.constant_delegate_args[position]:
                raise SystemExit(f"{where} a probe stage takes {facts.constant_delegate_args[position]} constant tensor(s)")
        elif payload is not None:
            check_payload(where, data, payload)
    if spec.cuda_submodule:
        check_probe_contract(where, edge_program)
    return facts


def check_payload(where: str, data: bytes, payload: str) -> None:
    if payload == "manifest" and not data.startswith(MANIFEST_MAGIC):
        raise SystemExit(f"{where} CUDA payload starts {data[:16]!r}, expected the {MANIFEST_MAGIC.decode()} manifest")
    if payload == "blob" and not BLOB_PAYLOAD.fullmatch(data):
        raise SystemExit(f"{where} CUDA payload {data[:80]!r}, expected '<so key>\\n<weights key>'")


def check_named_data(where: str, data: bytes, payload: str, pte: bytes, data_files: dict[str, bytes]) -> None:
    """The keys the payload names are where the delegate looks for them: the shared object in
    the program, the weights in the .ptd (keys are stored as plain strings in both)."""
    if payload == "blob":
        so_key, weights_key = data.split(b"\n")
    else:  # manifest: magic, u32 length, the shared object's key, then per-weight entries
        size = struct.unpack_from("<I", data, len(MANIFEST_MAGIC))[0]
        so_key = data[len(MANIFEST_MAGIC) + 4:len(MANIFEST_MAGIC) + 4 + size]
        weights_key = b"cuda_fqn_weight:"
    if so_key not in pte:
        raise SystemExit(f"{where} the shared object's key {so_key[:24]!r}... is not in model.pte")
    if not any(weights_key in blob for blob in data_files.values()):
        raise SystemExit(f"{where} no weights key {weights_key[:24]!r}... in {sorted(data_files)}")


def check_probe_contract(where: str, edge_program) -> None:
    """Each probe stage: one float32 input x of rank >= 1 that is no constant; outputs y = -x
    (float32, as many elements) and an int64[3]; its own program holds no constant."""
    signature = edge_program.graph_signature
    constants = {*signature.inputs_to_parameters, *signature.inputs_to_buffers, *signature.inputs_to_lifted_tensor_constants}
    for node in edge_program.graph.nodes:
        if node.target is not executorch_call_delegate:
            continue
        lowered = getattr(edge_program.graph_module, node.args[0].target)
        if lowered.backend_id != PROBE_BACKEND_ID:
            continue
        inputs = [a for a in node.args[1:] if isinstance(a, torch.fx.Node)]
        outputs = list(node.meta["val"])
        x = inputs[0].meta["val"] if len(inputs) == 1 else None
        if x is None or x.dtype != torch.float32 or x.dim() < 1 or inputs[0].name in constants:
            raise SystemExit(f"{where} probe stage inputs {[(i.name, i.meta['val'].dtype) for i in inputs]}: expected one float32 tensor")
        floats = [o.numel() for o in outputs if o.dtype == torch.float32]
        longs = [o.numel() for o in outputs if o.dtype == torch.int64]
        if len(outputs) != 2 or floats != [x.numel()] or longs != [3]:
            found = [(str(o.dtype), o.numel()) for o in outputs]
            raise SystemExit(f"{where} probe stage outputs {found}: expected float32[{x.numel()}] and int64[3]")
        own = lowered.original_module.graph_signature
        if any(s.kind != torch.export.graph_signature.InputKind.USER_INPUT for s in own.input_specs):
            raise SystemExit(f"{where} a probe stage's program holds constants: {own.input_specs}")


# --- Export ----------------------------------------------------------------------------------


@dataclass
class Target:
    """Where and how one export runs: the real CUDA backend on the GPU, or (self-test) a CPU
    stand-in delegate partitioned by the same code."""

    device: str
    make_partitioner: Callable[[], Partitioner]
    backend_id: str
    payload: str | None  # None: a stand-in, whose payload is not checked
    autotune: str
    timed_calls: int = EAGER_TIMED_CALLS
    warmup_calls: int = EAGER_WARMUP_CALLS


def cuda_target(payload: str, autotune: str) -> Target:
    return Target("cuda", lambda: CudaPartitioner(cuda_compile_specs(autotune)), CUDA_BACKEND_ID, payload, autotune)


def lower(spec: CudaSpec, target: Target):
    """torch.export, then partition and lower; returns (pte, {ptd name: bytes}, final program)."""
    example = spec.export_example if spec.export_example is not None else spec.cases[0]
    with torch.no_grad():
        exported = torch.export.export(spec.module, example, dynamic_shapes=spec.dynamic_shapes)
    partitioners = [ProbeStagePartitioner(spec.cuda_submodule)] if spec.cuda_submodule else []
    partitioners.append(target.make_partitioner())
    with cuda_payload_format(target.payload or "manifest"), inductor_settings(target.autotune):
        edge = to_edge_transform_and_lower(
            exported,
            partitioner=partitioners,
            # AOTI takes ops the edge verifier does not know; dim order ops are not needed.
            compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
        )
        manager = edge.to_executorch()
    with tempfile.TemporaryDirectory() as tmp:
        manager.write_tensor_data_to_file(tmp)
        files = {p.name: p.read_bytes() for p in sorted(Path(tmp).glob("*.ptd"))}
    return manager.buffer, files, manager.exported_program()


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def eager_outputs(module: nn.Module, inputs: Sequence[torch.Tensor], device: str) -> tuple[torch.Tensor, ...]:
    with torch.inference_mode():
        outputs = as_tuple(module(*[t.to(device) for t in inputs]))
    return tuple(o.cpu() for o in outputs)


def references(spec: CudaSpec, device_module: nn.Module, device: str) -> tuple[dict, float]:
    """The eager outputs on `device` for every case, and the largest float distance from the same
    module on the CPU (a sanity check of the tolerance: two correct implementations)."""
    cases, worst = [], 0.0
    for inputs in spec.cases:
        expected = eager_outputs(device_module, inputs, device)
        on_cpu = eager_outputs(spec.module, inputs, "cpu")
        for name, got, cpu in zip(spec.output_names, expected, on_cpu):
            if name not in spec.not_compared and got.is_floating_point():
                worst = max(worst, (got.double() - cpu.double()).abs().max().item())
        outputs = [tensor_json(n, t) for n, t in zip(spec.output_names, expected)]
        for entry in outputs:
            if entry["name"] in spec.not_compared:
                entry["compare"] = False
        cases.append({"inputs": [tensor_json(n, t) for n, t in zip(spec.input_names, inputs)], "outputs": outputs})
    reference = {"tolerance": TOLERANCE, "device": device, "device_name": device_name(device),
                 "torch": torch.__version__, "cuda": torch.version.cuda, "cases": cases}
    return reference, worst


def percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def eager_latency(spec: CudaSpec, device_module: nn.Module, target: Target) -> dict:
    """PyTorch eager on the same device and first case: every timed call includes its
    synchronize. Also with the host-to-device and device-to-host copies the service makes."""
    inputs = spec.cases[0]
    resident = [t.to(target.device) for t in inputs]

    def resident_call():
        device_module(*resident)

    def host_call():
        for o in as_tuple(device_module(*[t.to(target.device) for t in inputs])):
            o.cpu()

    timings = {}
    with torch.inference_mode():
        for label, call in (("resident", resident_call), ("host_io", host_call)):
            for _ in range(target.warmup_calls):
                call()
                synchronize(target.device)
            ms = []
            for _ in range(target.timed_calls):
                start = time.perf_counter()
                call()
                synchronize(target.device)
                ms.append((time.perf_counter() - start) * 1e3)
            timings[label] = sorted(ms)
    resident_ms, host_ms = timings["resident"], timings["host_io"]
    return {
        "model": spec.name,
        "what": "PyTorch eager, float32, TF32 off, batch of the first reference case; each call ends with a synchronize",
        "batch": int(inputs[0].shape[0]),
        "p50_ms": round(statistics.median(resident_ms), 4),
        "p90_ms": round(percentile(resident_ms, 0.9), 4),
        "p99_ms": round(percentile(resident_ms, 0.99), 4),
        "mean_ms": round(statistics.fmean(resident_ms), 4),
        "host_io_p50_ms": round(statistics.median(host_ms), 4),
        "calls": target.timed_calls,
        "warmup": target.warmup_calls,
        "device": device_name(target.device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if target.device == "cuda" else None,
    }


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def config_yaml(spec: CudaSpec) -> str:
    def tensor(name: str) -> str:
        dims = spec.input_dims.get(name)
        return f"{{ name: {name}" + (f", dims: {json.dumps(dims)}" if dims else "") + " }"

    lines = [
        "method: forward",
        f"inputs: [ {', '.join(tensor(n) for n in spec.input_names)} ]",
        f"outputs: [ {', '.join(f'{{ name: {n} }}' for n in spec.output_names)} ]",
        f"instances: {spec.instances}",
    ]
    if spec.placement:
        lines.append(f"placement: {spec.placement}")
    if spec.dynamic_batching:
        lines.append("dynamic-batching:")
        lines += [f"  {key}: {value}" for key, value in spec.dynamic_batching.items()]
    return "\n".join(lines) + "\n"


def export_one(spec: CudaSpec, out: Path, target: Target) -> dict:
    """Exports one model, checks it, computes its references and writes its directory."""
    log(f"{spec.name}: eager references and timing on {target.device}")
    # Before the lowering, from a copy: nothing the compile does can reach the reference.
    device_module = copy.deepcopy(spec.module).to(target.device).eval()
    reference, cpu_distance = references(spec, device_module, target.device)
    if cpu_distance > TOLERANCE["atol"] + TOLERANCE["rtol"]:
        log(f"WARNING {spec.name}: eager on {target.device} and on the CPU differ by {cpu_distance:.3g}, beyond the tolerance")
    eager = eager_latency(spec, device_module, target)
    del device_module

    log(f"{spec.name}: lowering (payload {target.payload}, autotune {target.autotune})")
    started = time.perf_counter()
    pte, data_files, program = lower(spec, target)
    export_seconds = time.perf_counter() - started
    if not data_files:
        raise SystemExit(f"{spec.name}: the lowering wrote no .ptd file")
    facts = check_program(spec, pte, program, target.backend_id, target.payload)
    if target.payload is not None:
        (payload,) = [data for backend, data in facts.delegates if backend == target.backend_id]
        check_named_data(spec.name + ":", payload, target.payload, pte, data_files)

    summary = {
        "model": spec.name,
        "bytes": len(pte),
        "delegates": [backend for backend, _ in facts.delegates],
        "sequence": facts.sequence,
        "data_files": {name: len(data) for name, data in data_files.items()},
        "export_seconds": round(export_seconds, 1),
        "payload": target.payload,
        "autotune": target.autotune,
        "eager_p50_ms": eager["p50_ms"],
        "eager_cpu_max_abs_diff": cpu_distance,
        "torch": torch.__version__,
    }
    write_model(out / spec.name, spec, pte, data_files, reference, eager, summary)
    return summary


def write_model(directory: Path, spec: CudaSpec, pte: bytes, data_files: dict[str, bytes],
                reference: dict, eager: dict, summary: dict) -> None:
    """Written only after every check passed, so a program and its reference never disagree."""
    version = directory / "1"
    version.mkdir(parents=True, exist_ok=True)
    for stale in version.glob("*.ptd"):
        stale.unlink()
    (directory / "config.yml").write_text(config_yaml(spec))
    (version / "model.pte").write_bytes(pte)
    for name, data in data_files.items():
        (version / name).write_bytes(data)
    (version / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    (version / "eager.json").write_text(json.dumps(eager) + "\n")
    (version / "export.json").write_text(json.dumps(summary) + "\n")


# --- Command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="export_cuda.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="directory that receives one folder per model")
    payload = parser.add_mutually_exclusive_group()
    payload.add_argument("--cuda-payload", choices=PAYLOAD_FORMATS,
                         help="named-data payload of the CUDA delegate (default: manifest)")
    payload.add_argument("--cuda-delegate", type=Path, metavar="DIR",
                         help="a delegate built by scripts/cuda-backend.sh: its DIR/payload-format decides")
    parser.add_argument("--cuda-autotune", choices=("on", "off"), default="off",
                        help="on: the backend's max_autotune; off (default): GEMM/conv templates with "
                             f"{OFF_GEMM_CANDIDATES} candidates, other kernels by heuristics")
    parser.add_argument("--only", nargs="+", choices=MODEL_NAMES, metavar="NAME",
                        help=f"export only these ({', '.join(MODEL_NAMES)})")
    parser.add_argument("--self-test", action="store_true", help="run the CPU checks and exit")
    args = parser.parse_args(argv)
    if not args.self_test and args.out is None:
        parser.error("--out DIR is required")
    return args


def resolve_payload(args: argparse.Namespace) -> tuple[str, str]:
    """The payload format to write and why."""
    if args.cuda_payload:
        return args.cuda_payload, "--cuda-payload"
    if args.cuda_delegate:
        marker = args.cuda_delegate / "payload-format"
        try:
            words = marker.read_text().split()
        except OSError as error:
            refuse(f"cannot read {marker} ({error.strerror}): build the delegate with "
                   "scripts/cuda-backend.sh build, or pass --cuda-payload manifest|blob")
        if not words or words[0] not in PAYLOAD_FORMATS:
            refuse(f"{marker} says {' '.join(words)[:40]!r}, expected blob or manifest")
        return words[0], f"{marker} says the delegate built there reads it"
    return "manifest", ("default: the delegate of executorch 1.5.1's CUDA wheel reads it; pass "
                        "--cuda-delegate DIR or --cuda-payload blob for one built from an older tree")


def refuse(sentence: str) -> None:
    print(f"export_cuda.py: {sentence}", file=sys.stderr)
    raise SystemExit(2)


def require_cuda() -> None:
    if torch.version.cuda is None or not torch.cuda.is_available():
        refuse(f"torch {torch.__version__} sees no CUDA device, and the CUDA export compiles and tunes its "
               "kernels on one: run it on a GPU host (--self-test runs the CPU checks here).")


def disable_tf32() -> None:
    """Float32 everywhere. PyTorch runs cuDNN convolutions in TF32 by default (10-bit mantissa,
    about 1e-3 relative): an eager reference made that way would be further from the exact
    result than the tolerance allows. The exported Triton kernels read the same flags when they
    are compiled, so both sides compute in IEEE float32."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.self_test:
        import export_cuda_selftest  # CPU checks, kept apart from the export itself

        return export_cuda_selftest.run(sys.modules[__name__])
    payload, why = resolve_payload(args)
    log(f"payload: {payload} ({why})")
    require_cuda()
    disable_tf32()
    log(f"autotune: {AUTOTUNE_MEANING[args.cuda_autotune]}")
    log(f"inductor cache: {os.environ.get('TORCHINDUCTOR_CACHE_DIR') or default_inductor_cache() + ' (default)'}")
    log(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}")
    target = cuda_target(payload, args.cuda_autotune)
    failed = []
    for name in args.only or MODEL_NAMES:
        # One model's failure must not cost the others their (scarce) GPU time.
        try:
            print(json.dumps(export_one(SPEC_BUILDERS[name](), args.out, target)), flush=True)
        except (Exception, SystemExit) as error:
            log(f"FAILED {name}: {error!r}")
            traceback.print_exc()
            failed.append(name)
    if failed:
        log(f"failed: {' '.join(failed)}")
    return 1 if failed else 0


def default_inductor_cache() -> str:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return default_cache_dir()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
