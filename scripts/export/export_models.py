#!/usr/bin/env python3
"""Exports the ExecuTorch programs that etserve ships and tests against.

Every expected output in a reference.json comes from eager PyTorch (the nn.Module itself),
never from running the exported .pte. Each exported program is then run through
ExecuTorch's Python runtime and must match that reference within the written tolerance;
otherwise this script fails before writing that model's files.

Deterministic: fixed seeds, fixed inputs. Run it through export.sh.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.external_constants_pass import delegate_external_constants_pass_unlifted
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY
from executorch.exir.backend.canonical_partitioners.all_node_partitioner import (
    AllNodePartitioner,
)
from executorch.runtime import Runtime

from export_common import (  # shared with export_cuda.py
    FLOAT_DTYPES,
    PROBE_BACKEND_ID,
    PROBE_PAYLOAD,
    CallerStreamProbe,  # noqa: F401 (registers the probe backend by its class name)
    SeededMlp,
    as_tuple,
    calibrate_batchnorm,
    grid_values,
    inspect_method,
    seeded_inputs,
    tensor_json,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVED_MODELS = REPO_ROOT / "models"
TEST_MODELS = REPO_ROOT / "src" / "test" / "resources" / "models"

# Float tolerance written into reference.json; verified below against every float output.
FLOAT_TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}
# Weight-heavy programs for benchmarks: exported on demand (--bench), never committed.
BENCH_MODELS = REPO_ROOT / "target" / "bench-models"
MAX_PTE_BYTES = 1 << 20

# Test-only stand-ins named after real GPU delegates. They exist only to produce programs that
# *declare* those delegates (the program's method metadata lists the backend id), so tests can
# check that a node without CUDA or TensorRT refuses such a model before any traffic. The
# payload is not an engine: these programs never run anywhere.
STAND_IN_PAYLOAD = b"etserve-test-stand-in"


class TensorRTBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs) -> PreprocessResult:
        return PreprocessResult(processed_bytes=STAND_IN_PAYLOAD)


class CudaBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs) -> PreprocessResult:
        return PreprocessResult(processed_bytes=STAND_IN_PAYLOAD)


class DemoMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


class AllDtypes(nn.Module):
    """One elementwise op per dtype; inputs are chosen so every output is exact."""

    def forward(self, a, b, c, d, e, f, g, h, i):
        return (
            a + 1,
            b * 2,
            c * 0.5,
            torch.logical_not(d),
            e + 1,
            f - 1,
            g * 3,
            h * 2,
            i * 2,
        )


class TwoInputs(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor):
        return a + b, a.mean(dim=1)


class CallerStreamProbeModel(nn.Module):
    """Only the signature matters (float32[2] -> int64[3]): the native probe delegate
    overwrites the output with [has_selection, handle, gpu_work_queued]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x[:1] * 0).to(torch.int64).expand(3).clone()


class BatchedProbeModel(nn.Module):
    """float32[B, 2] -> int64[B, 3]: the probe with a dynamic batch (1..32), for the GPU
    dynamic-batching benchmark; the delegate fills every row and runs one kernel per call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x[:, :1] * 0).to(torch.int64).expand(-1, 3).clone()


@dataclass
class ModelSpec:
    directory: Path
    module: nn.Module
    input_names: list[str]
    output_names: list[str]
    instances: int
    # Each case is one tuple of example inputs; the first also drives torch.export.
    cases: list[tuple[torch.Tensor, ...]]
    lower: Callable[[torch.export.ExportedProgram], bytes]
    # Backend ids the exported forward method must use, in any order (empty: portable only).
    expected_backends: set[str]
    # False for programs whose delegate only exists natively (no Python-side check possible).
    write_reference: bool = True
    # torch.export dynamic_shapes, for methods whose inputs may change size.
    dynamic_shapes: object = None
    # Constants moved into a .ptd beside the .pte (ExecutorchBackendConfig(external_constants)).
    external_constants: bool = False
    max_bytes: int = MAX_PTE_BYTES
    # config.yml's placement (cpu|gpu); None: decided by the program's delegates.
    placement: str | None = None
    # Inputs that drive torch.export instead of cases[0] (a dynamic dimension needs an example
    # above 1, which torch.export would otherwise specialize; the cases may then be single rows).
    export_example: tuple[torch.Tensor, ...] | None = None
    # False only where ExecuTorch's Python runtime cannot run the program right itself: it points
    # unplanned outputs at its own storage after setting the inputs, so a program that returns
    # its input answers that storage (zeros). The references stay eager's; the service's tests
    # check the program against them.
    python_runtime_check: bool = True


def lower_portable(exported: torch.export.ExportedProgram) -> bytes:
    return to_edge_transform_and_lower(exported).to_executorch().buffer


def lower_xnnpack(exported: torch.export.ExportedProgram) -> bytes:
    return to_edge_transform_and_lower(
        exported, partitioner=[XnnpackPartitioner()]
    ).to_executorch().buffer


def lower_external(partitioners: list) -> Callable:
    """Lowers with every constant in a named-data file; returns (pte, {ptd name: bytes})."""

    def lower(exported: torch.export.ExportedProgram):
        if partitioners:
            # Delegates keep their constants unless tagged on the unlifted graph first.
            unlifted = exported.module()
            delegate_external_constants_pass_unlifted(unlifted, gen_tag_fn=lambda node: "model")
            args, kwargs = exported.example_inputs
            exported = torch.export.export(unlifted, args, kwargs)
        manager = to_edge_transform_and_lower(exported, partitioner=partitioners).to_executorch(
            ExecutorchBackendConfig(external_constants=True)
        )
        with tempfile.TemporaryDirectory() as tmp:
            manager.write_tensor_data_to_file(tmp)
            files = {p.name: p.read_bytes() for p in sorted(Path(tmp).glob("*.ptd"))}
        if not files:
            raise SystemExit("external_constants produced no .ptd file")
        return manager.buffer, files

    return lower


# Inputs and outputs left unplanned: the runtime reads the caller's input where it lies and
# writes each output where the caller points it (Method::set_output_data_ptr), so a server
# copies neither (docs/large-tensors.md). Intermediates stay planned.
def unplanned_io() -> ExecutorchBackendConfig:
    return ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False)
    )


def lower_unplanned(partitioners: list) -> Callable:
    def lower(exported: torch.export.ExportedProgram) -> bytes:
        return to_edge_transform_and_lower(exported, partitioner=partitioners).to_executorch(
            unplanned_io()
        ).buffer

    return lower


def lower_caller_stream_probe(exported: torch.export.ExportedProgram) -> bytes:
    return to_edge_transform_and_lower(
        exported, partitioner=[AllNodePartitioner(PROBE_BACKEND_ID, [])]
    ).to_executorch().buffer


def lower_to(backend_id: str, target_device: bytes | None = None):
    """Everything to `backend_id`; with `target_device` (b"cuda:0", as CudaPartitioner says),
    the export copies to that device before the delegate and back after it, and plans the
    delegate's inputs and outputs in device memory."""
    specs = [] if target_device is None else [CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, target_device)]

    def lower(exported: torch.export.ExportedProgram) -> bytes:
        return to_edge_transform_and_lower(
            exported, partitioner=[AllNodePartitioner(backend_id, specs)]
        ).to_executorch().buffer

    return lower


def demo_mlp_spec(directory: Path, lower, expected_backends: set[str]) -> ModelSpec:
    torch.manual_seed(0)
    module = DemoMlp().eval()
    generator = torch.Generator().manual_seed(1234)
    cases = [(grid_values(generator, (1, 16)),) for _ in range(3)]
    return ModelSpec(directory, module, ["x"], ["y"], 2, cases, lower, expected_backends)


def dtypes_spec() -> ModelSpec:
    def case(a, b, c, d, e, f, g, h, i):
        return (
            torch.tensor(a, dtype=torch.int32),
            torch.tensor(b, dtype=torch.int64),
            torch.tensor(c, dtype=torch.float64),
            torch.tensor(d, dtype=torch.bool),
            torch.tensor(e, dtype=torch.uint8),
            torch.tensor(f, dtype=torch.int8),
            torch.tensor(g, dtype=torch.int16),
            torch.tensor(h, dtype=torch.float16),
            torch.tensor(i, dtype=torch.bfloat16),
        )

    cases = [
        case(
            [-5, 0, 1, 2147483646],  # reaches INT32 max
            [-3, 0, 7, 3_000_000_000],  # beyond the int32 range
            [1.5, -3.0, 0.1, 1e300],
            [True, False, False, True],
            [0, 1, 127, 254],  # reaches UINT8 max
            [-127, 0, 1, 127],  # reaches INT8 min
            [-10000, 0, 3, 10922],  # 32766, near INT16 max
            [0.5, -1.25, 1000.0, 2.0**-10],
            [0.5, -1.25, 256.0, 1572864.0],
        ),
        case(
            [-2147483647, 41, -1, 7],
            [-4_000_000_000, 1, -1, 123456789012],
            [-0.25, 2.0**-1000, 12345.678, -7.0],
            [False, True, True, False],
            [200, 2, 3, 99],
            [-1, 2, -100, 50],
            [-10922, 1, -3, 1000],
            [-0.125, 3.0, -2048.0, 0.75],
            [-0.125, 3.0, -2.0**100, 0.75],
        ),
    ]
    names = list("abcdefghi")
    return ModelSpec(
        TEST_MODELS / "dtypes",
        AllDtypes().eval(),
        names,
        [f"{n}_out" for n in names],
        1,
        cases,
        lower_portable,
        set(),
    )


def two_inputs_spec() -> ModelSpec:
    # Each row of a sums to a multiple of 3/4, so the mean is exact in float32.
    cases = [
        (
            torch.tensor([[1.0, 2.0, 3.0], [-1.5, 0.25, 2.0]]),
            torch.tensor([0.5, -1.0, 10.0]),
        ),
        (
            torch.tensor([[0.0, 0.0, 0.0], [100.0, -50.0, 0.5]]),
            torch.tensor([-0.25, 4.0, 0.125]),
        ),
    ]
    return ModelSpec(
        TEST_MODELS / "two-inputs",
        TwoInputs().eval(),
        ["a", "b"],
        ["sum", "mean"],
        2,
        cases,
        lower_portable,
        set(),
    )


def caller_stream_probe_spec() -> ModelSpec:
    return ModelSpec(
        TEST_MODELS / "caller-stream-probe",
        CallerStreamProbeModel().eval(),
        ["x"],
        ["observed"],
        1,
        [(torch.tensor([1.0, 2.0]),)],
        lower_caller_stream_probe,
        {PROBE_BACKEND_ID},
        write_reference=False,
        # The probe's delegate is not a CUDA one by name: the stream tests place it on the GPU.
        placement="gpu",
    )


def batched_probe_spec() -> ModelSpec:
    batch = torch.export.Dim("batch", min=1, max=32)
    return ModelSpec(
        TEST_MODELS / "batched-probe",
        BatchedProbeModel().eval(),
        ["x"],
        ["observed"],
        1,
        [(torch.tensor([[1.0, 2.0]] * 4),)],
        lower_caller_stream_probe,
        {PROBE_BACKEND_ID},
        write_reference=False,
        dynamic_shapes=({0: batch},),
        placement="gpu",
    )


def gpu_stand_in_spec(name: str, backend_id: str, target_device: bytes | None = None) -> ModelSpec:
    return ModelSpec(
        TEST_MODELS / name,
        DemoMlp().eval(),
        ["x"],
        ["y"],
        1,
        [(torch.zeros(1, 16),)],
        lower_to(backend_id, target_device),
        {backend_id},
        write_reference=False,
    )


def external_weights_spec(name: str, partitioners: list, backends: set[str]) -> ModelSpec:
    """Every weight in model.pte's sibling _default_external_constant.ptd."""
    return ModelSpec(
        TEST_MODELS / name,
        SeededMlp(7, [16, 64, 64, 4]).eval(),
        ["x"],
        ["y"],
        2,
        seeded_inputs(70, (2, 16), (2, 16)),
        lower_external(partitioners),
        backends,
        external_constants=True,
    )


def mobilenet_spec() -> ModelSpec:
    """torchvision's MobileNetV3-small, random init from a fixed seed, one 1x3x224x224 image."""
    import torchvision  # export-only dependency (requirements.txt)

    torch.manual_seed(3)
    model = torchvision.models.mobilenet_v3_small(weights=None)
    model = calibrate_batchnorm(model, 31, (8, 3, 224, 224), (8, 3, 224, 224))
    return ModelSpec(
        TEST_MODELS / "mobilenet-v3-small",
        model,
        ["image"],
        ["logits"],
        1,
        seeded_inputs(30, (1, 3, 224, 224)),
        lower_xnnpack,
        {"XnnpackBackend"},
        max_bytes=16 << 20,
    )


def dynamic_batch_spec() -> ModelSpec:
    """Batch 1..32: the exported program plans for 32 and accepts any smaller batch."""
    batch = torch.export.Dim("batch", min=1, max=32)
    return ModelSpec(
        TEST_MODELS / "dynamic-batch",
        SeededMlp(11, [16, 32, 4]).eval(),
        ["x"],
        ["y"],
        2,
        seeded_inputs(110, (3, 16), (1, 16), (32, 16)),
        lower_xnnpack,
        {"XnnpackBackend"},
        dynamic_shapes=({0: batch},),
    )


def config_yaml(spec: ModelSpec) -> str:
    inputs = ", ".join(f"{{ name: {n} }}" for n in spec.input_names)
    outputs = ", ".join(f"{{ name: {n} }}" for n in spec.output_names)
    return (
        "method: forward\n"
        f"inputs: [ {inputs} ]\n"
        f"outputs: [ {outputs} ]\n"
        f"instances: {spec.instances}\n"
        + (f"placement: {spec.placement}\n" if spec.placement else "")
    )


def check_matches(spec: ModelSpec, case_index: int, expected, actual) -> float:
    """Fails unless the runtime output equals the eager one: exactly for integers and
    bools, within FLOAT_TOLERANCE for floats. Returns the largest float deviation."""
    if len(actual) != len(expected):
        raise SystemExit(f"{spec.directory}: case {case_index}: {len(actual)} outputs, expected {len(expected)}")
    worst = 0.0
    for name, want, got in zip(spec.output_names, expected, actual):
        where = f"{spec.directory.name}: case {case_index}: output {name}"
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            raise SystemExit(f"{where}: runtime gave {got.dtype}{list(got.shape)}, eager {want.dtype}{list(want.shape)}")
        if want.dtype in FLOAT_DTYPES:
            ok = torch.allclose(got, want, atol=FLOAT_TOLERANCE["atol"], rtol=FLOAT_TOLERANCE["rtol"])
            worst = max(worst, (got.double() - want.double()).abs().max().item())
        else:
            ok = torch.equal(got, want)
        if not ok:
            raise SystemExit(f"{where}: runtime {got.tolist()} != eager {want.tolist()}")
    return worst


def export_one(spec: ModelSpec, runtime: Runtime) -> dict:
    with torch.no_grad():
        example = spec.export_example if spec.export_example is not None else spec.cases[0]
        exported = torch.export.export(spec.module, example, dynamic_shapes=spec.dynamic_shapes)
        pte = spec.lower(exported)
    data_files: dict[str, bytes] = {}
    if spec.external_constants:
        pte, data_files = pte

    if len(pte) >= spec.max_bytes and not spec.directory.is_relative_to(BENCH_MODELS):
        raise SystemExit(f"{spec.directory}: program is {len(pte)} bytes")
    operators, delegates = inspect_method(pte, "forward")
    backends = [backend for backend, _ in delegates]
    if set(backends) != spec.expected_backends:
        raise SystemExit(f"{spec.directory}: forward uses backends {backends}, expected {sorted(spec.expected_backends)}")
    if PROBE_BACKEND_ID in backends:
        # The probe must own the whole graph, so its delegate alone writes the output.
        if operators or delegates != [(PROBE_BACKEND_ID, PROBE_PAYLOAD)]:
            raise SystemExit(f"{spec.directory}: not wholly delegated: {operators} {delegates}")

    summary = {
        "model": str(spec.directory.relative_to(REPO_ROOT)),
        "bytes": len(pte),
        "sha256": hashlib.sha256(pte).hexdigest(),
        "backends": backends,
        "operators": operators,
        "data_files": {name: len(data) for name, data in data_files.items()},
    }
    reference = None
    if spec.write_reference:
        reference, summary["max_float_deviation"] = verified_reference(spec, runtime, pte, data_files)

    # Written only after every check passed: a model's .pte and reference never disagree.
    version_dir = spec.directory / "1"
    version_dir.mkdir(parents=True, exist_ok=True)
    (spec.directory / "config.yml").write_text(config_yaml(spec))
    (version_dir / "model.pte").write_bytes(pte)
    for stale in version_dir.glob("*.ptd"):
        stale.unlink()
    for name, data in data_files.items():
        (version_dir / name).write_bytes(data)
    if reference is not None:
        (version_dir / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    return summary


def verified_reference(spec: ModelSpec, runtime: Runtime, pte: bytes,
                       data_files: dict[str, bytes]) -> tuple[dict, float]:
    """Eager outputs for every case, after checking the program reproduces them."""
    with tempfile.TemporaryDirectory() as tmp:
        data_path = None
        if data_files:
            if len(data_files) != 1:
                raise SystemExit(f"{spec.directory}: the Python runtime takes one .ptd, got {list(data_files)}")
            name, data = next(iter(data_files.items()))
            data_path = Path(tmp) / name
            data_path.write_bytes(data)
        program = runtime.load_program(pte, data_path=data_path)
        return run_cases(spec, program.load_method("forward"))


def run_cases(spec: ModelSpec, method) -> tuple[dict, float]:
    cases = []
    worst = 0.0
    for index, inputs in enumerate(spec.cases):
        with torch.no_grad():
            expected = as_tuple(spec.module(*inputs))
        if spec.python_runtime_check:
            actual = as_tuple(method.execute([t.clone() for t in inputs]))
            worst = max(worst, check_matches(spec, index, expected, actual))
        cases.append(
            {
                "inputs": [tensor_json(n, t) for n, t in zip(spec.input_names, inputs)],
                "outputs": [tensor_json(n, t) for n, t in zip(spec.output_names, expected)],
            }
        )
    return {"tolerance": FLOAT_TOLERANCE, "cases": cases}, worst


def weights_heavy_spec(name: str, lower, backends: set[str], external: bool = False) -> ModelSpec:
    """About 84 MB of float32 weights (1024 -> 4096 -> 4096 -> 16): the weights-once benchmark."""
    return ModelSpec(
        BENCH_MODELS / name,
        SeededMlp(5, [1024, 4096, 4096, 16]).eval(),
        ["x"],
        ["y"],
        1,
        seeded_inputs(50, (1, 1024)),
        lower,
        backends,
        external_constants=external,
    )


def batch_mlp_spec() -> ModelSpec:
    """The dynamic-batching benchmark: 32 MB of float32 weights (1024 -> 2048 -> 2048 -> 1024),
    XNNPACK, batch 1..32; its reference cases are single rows, as the benchmark's requests are."""
    batch = torch.export.Dim("batch", min=1, max=32)
    return ModelSpec(
        BENCH_MODELS / "batch-mlp",
        SeededMlp(13, [1024, 2048, 2048, 1024]).eval(),
        ["x"],
        ["y"],
        2,
        seeded_inputs(130, (1, 1024), (1, 1024), (1, 1024), (1, 1024)),
        lower_xnnpack,
        {"XnnpackBackend"},
        dynamic_shapes=({0: batch},),
        export_example=seeded_inputs(131, (4, 1024))[0],
    )


class Affine(nn.Module):
    """y = 2x + 1, elementwise: a data-path benchmark (tensor bytes in and out, no weights)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def affine_spec(name: str, shape: Sequence[int], directory: Path = BENCH_MODELS, reference: bool = True,
                unplanned: bool = False, cases: int = 1) -> ModelSpec:
    return ModelSpec(
        directory / name,
        Affine().eval(),
        ["x"],
        ["y"],
        2,
        seeded_inputs(70, *([tuple(shape)] * cases)),
        lower_unplanned([XnnpackPartitioner()]) if unplanned else lower_xnnpack,
        {"XnnpackBackend"},
        write_reference=reference,
    )


class PassThrough(nn.Module):
    """Returns its input as the first output, beside a portable kernel's result."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, x * 3.0 - 0.5


def unplanned_specs() -> list[ModelSpec]:
    """Programs whose inputs and outputs are the caller's memory (no copies in the bridge):
    XNNPACK at a static shape, the dynamic batch, and a portable program that returns its input."""
    batch = torch.export.Dim("batch", min=1, max=32)
    dynamic = dynamic_batch_spec()
    return [
        affine_spec("unplanned-affine", (4, 3, 8, 8), TEST_MODELS, unplanned=True, cases=3),
        ModelSpec(
            TEST_MODELS / "unplanned-dynamic-batch",
            dynamic.module,
            ["x"],
            ["y"],
            2,
            dynamic.cases,
            lower_unplanned([XnnpackPartitioner()]),
            {"XnnpackBackend"},
            dynamic_shapes=({0: batch},),
        ),
        ModelSpec(
            TEST_MODELS / "unplanned-passthrough",
            PassThrough().eval(),
            ["x"],
            ["same", "scaled"],
            1,
            seeded_inputs(72, (2, 5), (2, 5)),
            lower_unplanned([]),
            set(),
            python_runtime_check=False,
        ),
    ]


def main() -> int:
    torch.use_deterministic_algorithms(True)
    runtime = Runtime.get()
    if sys.argv[1:2] == ["--bench"]:
        # --bench [name ...]: every benchmark program, or the ones named.
        wanted = set(sys.argv[2:])
        for spec in [
            weights_heavy_spec("heavy-portable", lower_portable, set()),
            weights_heavy_spec("heavy-xnnpack", lower_xnnpack, {"XnnpackBackend"}),
            weights_heavy_spec("heavy-xnnpack-ptd", lower_external([XnnpackPartitioner()]), {"XnnpackBackend"}, True),
            # The data-path benchmark: an image (1x3x224x224 FP32, 588 KiB) and 4 MiB, in and out.
            affine_spec("affine-image", (1, 3, 224, 224)),
            affine_spec("affine-4mib", (1, 1024 * 1024)),
            # The same two with inputs and outputs left to the caller (no copies in the bridge).
            affine_spec("affine-image-unplanned", (1, 3, 224, 224), unplanned=True),
            affine_spec("affine-4mib-unplanned", (1, 1024 * 1024), unplanned=True),
            batch_mlp_spec(),
        ]:
            if not wanted or spec.directory.name in wanted:
                print(json.dumps(export_one(spec, runtime)))
        return 0
    specs = [
        demo_mlp_spec(SERVED_MODELS / "demo-portable", lower_portable, set()),
        demo_mlp_spec(SERVED_MODELS / "demo-xnnpack", lower_xnnpack, {"XnnpackBackend"}),
        dtypes_spec(),
        two_inputs_spec(),
        caller_stream_probe_spec(),
        batched_probe_spec(),
        gpu_stand_in_spec("needs-tensorrt", "TensorRTBackend"),
        # As CudaPartitioner lowers: copies around the delegate, its tensors planned on cuda:0.
        gpu_stand_in_spec("needs-cuda-backend", "CudaBackend", b"cuda:0"),
        external_weights_spec("external-weights-portable", [], set()),
        external_weights_spec("external-weights-xnnpack", [XnnpackPartitioner()], {"XnnpackBackend"}),
        dynamic_batch_spec(),
        mobilenet_spec(),
        # The data-path test's 4 MiB tensors: y = 2x + 1 is checked in the test itself (a
        # reference would be megabytes of JSON; --bench affine-4mib checks the same program
        # against eager).
        affine_spec("affine-4mib", (1, 1024 * 1024), TEST_MODELS, reference=False),
        *unplanned_specs(),
    ]
    if sys.argv[1:2] == ["--only"]:
        # --only name ...: just the committed models named (by directory), the others untouched.
        wanted = set(sys.argv[2:])
        specs = [s for s in specs if s.directory.name in wanted]
        if len(specs) != len(wanted):
            raise SystemExit(f"--only: unknown model in {sorted(wanted)}")
    for spec in specs:
        print(json.dumps(export_one(spec, runtime)))
    print(f"torch {torch.__version__}; tolerance verified: {FLOAT_TOLERANCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
