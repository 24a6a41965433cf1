"""CPU checks of export_cuda.py (run them with `export_cuda.py --self-test`).

Everything the CUDA export does except compiling for and running on the GPU: the arguments, the
payload switch and the Inductor settings as the installed executorch and torch take them, every
model's definition and torch.export, and the whole export of each model with a CPU stand-in for
the CUDA delegate, partitioned by the same AotiPartitioner code CudaPartitioner is (same compile
specs, same target_device), so the probe-stage tagging, the host-device copies and the files
written are the ones a GPU run produces.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import yaml
from torch import nn

from executorch.backends.aoti.aoti_backend import AotiBackend
from executorch.backends.aoti.aoti_partitioner import AotiPartitioner
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

STAND_IN_ID = "CudaStandIn"
STAND_IN_PAYLOAD = b"cuda-stand-in"


class CudaStandIn(BackendDetails):
    """Takes the CUDA partition on a machine without CUDA; like CudaBackend it puts its data in
    the aoti_cuda_blob named-data file."""

    @staticmethod
    def preprocess(edge_program, compile_specs) -> PreprocessResult:
        store = NamedDataStore()
        store.add_named_data("stand_in_weights", b"\0" * 64, 1, "aoti_cuda_blob")
        return PreprocessResult(processed_bytes=STAND_IN_PAYLOAD, data_store_output=store.get_named_data_store_output())


def stand_in_target(ec, autotune: str = "off"):
    def partitioner():
        # CudaPartitioner is AotiPartitioner("CudaBackend", specs + [target_device cuda:0]).
        specs = ec.cuda_compile_specs(autotune) + [CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, b"cuda:0")]
        return AotiPartitioner(STAND_IN_ID, specs)

    return ec.Target("cpu", partitioner, STAND_IN_ID, None, autotune, timed_calls=3, warmup_calls=1)


def exit_code(call) -> int | None:
    """The SystemExit code `call` raises (None if it returns), its stderr swallowed."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            call()
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1
    return None


def check_arguments(ec) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        assert exit_code(lambda: ec.parse_args([])) == 2, "--out is required"
        assert exit_code(lambda: ec.parse_args(["--out", tmp, "--cuda-payload", "blob", "--cuda-delegate", tmp])) == 2
        assert exit_code(lambda: ec.parse_args(["--out", tmp, "--only", "no-such-model"])) == 2
        assert exit_code(lambda: ec.parse_args(["--out", tmp, "--cuda-autotune", "max"])) == 2
        assert exit_code(lambda: ec.parse_args(["--out", tmp, "--cuda-payload", "pickle"])) == 2
        args = ec.parse_args(["--out", tmp])
        assert (args.cuda_autotune, args.cuda_payload, args.cuda_delegate, args.only) == ("off", None, None, None)
        args = ec.parse_args(["--out", tmp, "--only", "cuda-mlp", "mixed-probe-cuda", "--cuda-autotune", "on"])
        assert args.only == ["cuda-mlp", "mixed-probe-cuda"] and args.cuda_autotune == "on"

        fmt, why = ec.resolve_payload(ec.parse_args(["--out", tmp]))
        assert fmt == "manifest" and why.startswith("default"), (fmt, why)
        assert ec.resolve_payload(ec.parse_args(["--out", tmp, "--cuda-payload", "blob"]))[0] == "blob"
        delegate = Path(tmp) / "delegate"
        delegate.mkdir()
        with_delegate = ec.parse_args(["--out", tmp, "--cuda-delegate", str(delegate)])
        assert exit_code(lambda: ec.resolve_payload(with_delegate)) == 2, "a missing payload-format file is an error"
        for written, expected in (("blob\n", "blob"), ("manifest", "manifest")):
            (delegate / "payload-format").write_text(written)
            fmt, why = ec.resolve_payload(with_delegate)
            assert fmt == expected and "payload-format" in why, (fmt, why)
        (delegate / "payload-format").write_text("pickle_weights\n")
        assert exit_code(lambda: ec.resolve_payload(with_delegate)) == 2, "an unknown format is an error"
        if not torch.cuda.is_available():
            assert exit_code(lambda: ec.main(["--out", tmp])) == 2, "no CUDA device: exit 2"


def backend_classes(name: str) -> list[type]:
    return [c for c in BackendDetails.__subclasses__() if c.__name__ == name]


def check_payload_switch(ec) -> None:
    cuda = ec.CudaBackend
    # Backends are looked up by class name among BackendDetails' direct subclasses.
    assert backend_classes("CudaBackend") == [cuda], backend_classes("CudaBackend")
    assert len(backend_classes(ec.PROBE_BACKEND_ID)) == 1
    specs = ec.cuda_compile_specs("off")
    fmt = "aot_inductor.package_constants_on_disk_format"
    originals = {name: cuda.__dict__[name] for name in ec._CUDA_BACKEND_OVERRIDES}
    assert cuda.get_aoti_compile_options(specs)[fmt] == "pickle_weights"
    with ec.cuda_payload_format("manifest"):
        assert cuda.get_aoti_compile_options(specs)[fmt] == "pickle_weights"
    with ec.cuda_payload_format("blob"):
        assert cuda.get_aoti_compile_options(specs)[fmt] == "binary_blob"
        assert cuda.preprocess.__func__ is AotiBackend.preprocess.__func__
        assert cuda.preprocess_multimethod.__func__ is BackendDetails.preprocess_multimethod.__func__
        # What to_backend and lower_all_submodules_to_backend find by the backend id.
        assert {c.__name__: c for c in BackendDetails.__subclasses__()}["CudaBackend"] is cuda
    assert {n: cuda.__dict__[n] for n in originals} == originals, "restored after the lowering"
    with contextlib.suppress(RuntimeError), ec.cuda_payload_format("blob"):
        raise RuntimeError("a failed lowering")
    assert {n: cuda.__dict__[n] for n in originals} == originals, "restored after a failure too"
    # The generic AOTI path still writes the two-key payload and reads the dense blob file.
    source = inspect.getsource(AotiBackend.preprocess)
    assert 'so_blob_key + "\\n" + weights_blob_key' in source and ".wrapper_weights.blob" in source
    ec.check_payload("t:", ec.MANIFEST_MAGIC + b"\0" * 8, "manifest")
    ec.check_payload("t:", b"a" * 64 + b"_so_blob\n" + b"0" * 64 + b"_weights_blob", "blob")
    with contextlib.redirect_stderr(io.StringIO()):
        assert exit_code(lambda: ec.check_payload("t:", ec.MANIFEST_MAGIC, "blob")) == 1
        assert exit_code(lambda: ec.check_payload("t:", b"x\ny", "manifest")) == 1
    # Where the payload's keys must be found (the encoding of cuda_weight_collector.py).
    from executorch.backends.cuda.cuda_weight_collector import CudaWeightEntry, encode_cuda_weight_metadata

    so_key, weights_key = "a" * 64 + "_so_blob", "cuda_fqn_weight:cuda:net.0.weight"
    manifest = encode_cuda_weight_metadata(so_key, [CudaWeightEntry("net.0.weight", weights_key, 16, 6, 1, 0, (2, 2), (2, 1))])
    blob = so_key.encode() + b"\n" + b"0" * 64 + b"_weights_blob"
    ec.check_named_data("t:", manifest, "manifest", b"..." + so_key.encode(), {"w.ptd": weights_key.encode()})
    ec.check_named_data("t:", blob, "blob", so_key.encode(), {"w.ptd": b"0" * 64 + b"_weights_blob"})
    assert exit_code(lambda: ec.check_named_data("t:", manifest, "manifest", b"", {"w.ptd": weights_key.encode()})) == 1
    assert exit_code(lambda: ec.check_named_data("t:", blob, "blob", so_key.encode(), {"w.ptd": b""})) == 1


def check_autotune_settings(ec) -> None:
    from torch._inductor import config as inductor_config

    for mode, expected in (("on", True), ("off", False)):
        specs = ec.cuda_compile_specs(mode)
        options = ec.CudaBackend.get_aoti_compile_options(specs)
        assert options["max_autotune"] is expected, options
        assert options["max_autotune_gemm_backends"] == "TRITON" and options["max_autotune_conv_backends"] == "TRITON"
        # The float32 SDPA is decomposed, not swapped for the bfloat16-only Triton kernel.
        passes = [type(p).__name__ for p in ec.CudaBackend.get_custom_passes(specs)]
        assert "ReplaceEdgeOpWithTritonOpPass" not in passes, passes
        # aot_compile applies the options with config.patch: every key must exist in this torch.
        with inductor_config.patch({k: v for k, v in options.items() if k != "aot_inductor.custom_ops_to_c_shims"}):
            pass
    gemm, candidates = inductor_config.max_autotune_gemm, inductor_config.test_configs.max_mm_configs
    with ec.inductor_settings("off"):
        assert inductor_config.max_autotune_gemm is True
        assert inductor_config.test_configs.max_mm_configs == ec.OFF_GEMM_CANDIDATES
        assert inductor_config.coordinate_descent_tuning is False
    with ec.inductor_settings("on"):
        assert inductor_config.max_autotune_gemm == gemm and inductor_config.test_configs.max_mm_configs == candidates
        assert inductor_config.coordinate_descent_tuning is False
    assert (inductor_config.max_autotune_gemm, inductor_config.test_configs.max_mm_configs) == (gemm, candidates)


def check_encoder(ec) -> None:
    """The hand-written block computes what nn.TransformerEncoderLayer computes, and the library
    layers themselves export to plain ops (no fused fast path) that the CUDA partition takes."""
    layer = ec.seeded_encoder_layer(19)
    block = ec.EncoderBlock.from_layer(layer)
    tokens = torch.randn(2, 128, 256, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        distance = (block(tokens) - layer(tokens)).abs().max().item()
    assert distance < 1e-5, distance

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(256, 4, batch_first=True)

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]

    for module in (layer, Attention().eval(), block):
        with torch.no_grad():
            ops = {str(n.target) for n in torch.export.export(module, (tokens[:1],)).graph.nodes if n.op == "call_function"}
        fused = {op for op in ops if "_transformer_encoder_layer_fwd" in op or "_native_multi_head_attention" in op}
        assert not fused and "aten.scaled_dot_product_attention.default" in ops, ops


def check_models(ec) -> None:
    for name in ec.MODEL_NAMES:
        spec = ec.SPEC_BUILDERS[name]()
        assert spec.name == name and not spec.module.training
        assert len({tuple(t.flatten()[:8].tolist()) for (t, *_) in spec.cases}) == len(spec.cases), f"{name}: cases repeat"
        for inputs in spec.cases:
            outputs = ec.eager_outputs(spec.module, inputs, "cpu")
            assert len(outputs) == len(spec.output_names), name
            assert all(o.dtype == torch.float32 for o, n in zip(outputs, spec.output_names) if n not in spec.not_compared)
    mixed = ec.mixed_probe_cuda_spec()
    assert len(mixed.cases) == 64 and mixed.placement == "gpu"
    y, before, after = ec.eager_outputs(mixed.module, mixed.cases[0], "cpu")
    assert (tuple(y.shape), before.dtype, tuple(before.shape), after.dtype, tuple(after.shape)) == (
        (1, 64), torch.int64, (3,), torch.int64, (3,))
    mlp = ec.cuda_mlp_spec()
    assert [t.shape[0] for (t,) in mlp.cases] == [1, 3, 32] and mlp.export_example[0].shape[0] > 1


def check_exports(ec) -> None:
    """The whole export of every model on the CPU with the stand-in, files included."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        target = stand_in_target(ec)
        for name in ec.MODEL_NAMES:
            started = time.perf_counter()
            summary = ec.export_one(ec.SPEC_BUILDERS[name](), out, target)
            check_written(ec, out / name, summary)
            print(f"  {name}: {summary['sequence']} ({time.perf_counter() - started:.1f} s)")
        mlp = ec.read_program((out / "cuda-mlp" / "1" / "model.pte").read_bytes())
        assert mlp.io_devices == ["CPU", "CPU"]
        config = yaml.safe_load((out / "cuda-mlp" / "config.yml").read_text())
        assert config["inputs"] == [{"name": "x", "dims": [-1, 64]}] and config["instances"] == 1
        assert config["dynamic-batching"] == {"max-batch-size": 32, "max-queue-delay": "500us"}
        mixed = yaml.safe_load((out / "mixed-probe-cuda" / "config.yml").read_text())
        assert mixed["placement"] == "gpu"
        assert [o["name"] for o in mixed["outputs"]] == ["y", "observed_before", "observed_after"]
        reference = json.loads((out / "mixed-probe-cuda" / "1" / "reference.json").read_text())
        assert len(reference["cases"]) == 64
        for case in reference["cases"]:
            assert [o.get("compare", True) for o in case["outputs"]] == [True, False, False]
        shapes = [c["inputs"][0]["shape"] for c in json.loads((out / "cuda-mlp" / "1" / "reference.json").read_text())["cases"]]
        assert shapes == [[1, 64], [3, 64], [32, 64]], shapes


def check_written(ec, directory: Path, summary: dict) -> None:
    version = directory / "1"
    names = sorted(p.name for p in version.iterdir())
    assert names == ["aoti_cuda_blob.ptd", "eager.json", "export.json", "model.pte", "reference.json"], names
    reference = json.loads((version / "reference.json").read_text())
    assert reference["tolerance"] == ec.TOLERANCE and reference["device"] == "cpu" and reference["torch"] == torch.__version__
    eager = json.loads((version / "eager.json").read_text())
    assert eager["calls"] == 3 and eager["p50_ms"] > 0 and eager["batch"] == 1
    assert (version / "eager.json").read_text().count("\n") == 1, "one line"
    assert json.loads((version / "export.json").read_text()) == json.loads(json.dumps(summary))
    config = yaml.safe_load((directory / "config.yml").read_text())
    first = reference["cases"][0]
    assert config["method"] == "forward"
    assert [i["name"] for i in config["inputs"]] == [i["name"] for i in first["inputs"]]
    assert [o["name"] for o in config["outputs"]] == [o["name"] for o in first["outputs"]]


def check_probe_guards(ec) -> None:
    """The checks on probe stages are not vacuous: a stage that reads a weight, and a CUDA
    submodule the graph does not have, both fail the export."""

    class ScaledFirst(ec.MixedProbeCuda):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.full((64,), 2.0))

        def forward(self, x):
            a = torch.neg(x) * self.scale  # a constant inside the first probe stage
            h = self.mlp(a)
            return torch.neg(h), x[0, :3].to(torch.int64), h[0, :3].to(torch.int64)

    target = stand_in_target(ec)
    spec = ec.mixed_probe_cuda_spec()
    spec.module = ScaledFirst().eval()
    pte, _, program = ec.lower(spec, target)
    assert exit_code(lambda: ec.check_program(spec, pte, program, STAND_IN_ID, None)) == 1
    spec = ec.mixed_probe_cuda_spec()
    spec.cuda_submodule = "encoder"
    assert exit_code(lambda: ec.lower(spec, target)) == 1


def check_no_runtime_import(ec) -> None:
    """ExecuTorch's Python runtime links its own libtorch (2.14): the CUDA host's torch (2.11)
    cannot load it, so nothing on the export path may import it."""
    runtime = [m for m in sys.modules if m.startswith(("executorch.runtime", "executorch.extension.pybindings"))]
    native = [m for m, module in list(sys.modules.items())
              if m.startswith("executorch") and str(getattr(module, "__file__", "")).endswith(".so")]
    assert not runtime and not native, (runtime, native)


CHECKS = [
    check_arguments,
    check_payload_switch,
    check_autotune_settings,
    check_encoder,
    check_models,
    check_exports,
    check_probe_guards,
    check_no_runtime_import,
]


def run(ec) -> int:
    passed = failed = 0
    for check in CHECKS:
        started = time.perf_counter()
        try:
            check(ec)
            passed += 1
            print(f"ok    {check.__name__} ({time.perf_counter() - started:.1f} s)", flush=True)
        except (Exception, SystemExit):
            failed += 1
            print(f"FAIL  {check.__name__}", flush=True)
            traceback.print_exc()
    print(f"torch {torch.__version__}")
    print(f"self-test: {passed} passed, {failed} failed")
    return 1 if failed else 0
