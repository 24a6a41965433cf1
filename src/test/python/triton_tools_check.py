"""Triton's Python clients (HTTP and gRPC) against etserve's model configuration and statistics
extensions and the load with a configuration, as Triton's tools use them: the configuration read
back through Triton's own model_config.proto (json_format.ParseDict, no unknown field allowed),
the statistics counted against the requests sent, requests compressed with gzip and deflate, and
Model Analyzer's remote-mode step (the configuration read, changed, sent back with
load_model(config=...)). Prints one line per check and exits non-zero on the first failure.
Usage: triton_tools_check.py HTTP_HOST:PORT GRPC_HOST:PORT MODELS_DIR"""
import json
import sys
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.model_config_pb2 as mc
import tritonclient.http as httpclient
from checks import check, refused
from google.protobuf import json_format

http_url, grpc_url, models_dir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
http = httpclient.InferenceServerClient(url=http_url)
grpc = grpcclient.InferenceServerClient(url=grpc_url)


for client, name in ((http, "http"), (grpc, "grpc")):
    meta = client.get_server_metadata()
    extensions = meta["extensions"] if name == "http" else list(meta.extensions)
    check(f"{name}: server metadata lists model_configuration and statistics",
          {"model_configuration", "statistics", "model_repository", "binary_tensor_data"} <= set(extensions),
          str(extensions))

# The configuration, read through Triton's own message definitions.
for model, batched in (("demo-portable", False), ("batched", True)):
    doc = http.get_model_config(model)
    parsed = json_format.ParseDict(doc, mc.ModelConfig())  # refuses any field Triton does not have
    over_grpc = grpc.get_model_config(model).config
    check(f"{model}: HTTP and gRPC configurations are the same message", parsed == over_grpc,
          json_format.MessageToJson(over_grpc)[:200])
    check(f"{model}: platform executorch", parsed.platform == "executorch")
    ref = json.loads((models_dir / ("demo-portable" if model == "demo-portable" else "dynamic-batch") / "1"
                      / "reference.json").read_text())
    shape = ref["cases"][0]["inputs"][0]["shape"]
    if batched:
        check(f"{model}: max_batch_size from its config.yml, dims without the batch dimension",
              parsed.max_batch_size == 8 and list(parsed.input[0].dims) == shape[1:]
              and parsed.HasField("dynamic_batching")
              and parsed.dynamic_batching.max_queue_delay_microseconds == 500, str(parsed.input[0].dims))
    else:
        check(f"{model}: not batched, every dimension", parsed.max_batch_size == 0
              and list(parsed.input[0].dims) == shape and not parsed.HasField("dynamic_batching"))
    check(f"{model}: instance group from config.yml (2 on the CPU)", len(parsed.instance_group) == 1
          and parsed.instance_group[0].count == 2 and parsed.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU)
    meta = http.get_model_metadata(model)
    check(f"{model}: every configured tensor is in the metadata",
          {t.name for t in parsed.input} <= {t["name"] for t in meta["inputs"]}
          and {t.name for t in parsed.output} <= {t["name"] for t in meta["outputs"]})

# Statistics count the requests sent, over both protocols.
ref = json.loads((models_dir / "demo-portable" / "1" / "reference.json").read_text())
case = ref["cases"][0]["inputs"][0]
before = http.get_inference_statistics("demo-portable")["model_stats"][0]
for i in range(3):
    x = httpclient.InferInput(case["name"], case["shape"], case["datatype"])
    x.set_data_from_numpy(np.array(case["data"], dtype=np.float32).reshape(case["shape"]), binary_data=True)
    http.infer("demo-portable", [x])
    g = grpcclient.InferInput(case["name"], case["shape"], case["datatype"])
    g.set_data_from_numpy(np.array(case["data"], dtype=np.float32).reshape(case["shape"]))
    grpc.infer("demo-portable", [g])
after = http.get_inference_statistics("demo-portable")["model_stats"][0]
check("statistics: version is a numeric string", isinstance(after["version"], str) and after["version"].isdigit())
for key in ("inference_count", "execution_count"):
    check(f"statistics: {key} rose by the 6 requests sent", after[key] - before[key] == 6, f"{before[key]} -> {after[key]}")
for key in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
    rose = after["inference_stats"][key]["count"] - before["inference_stats"][key]["count"]
    check(f"statistics: inference_stats.{key}.count rose by 6", rose == 6, str(rose))
check("statistics: compute_infer took time", after["inference_stats"]["compute_infer"]["ns"]
      > before["inference_stats"]["compute_infer"]["ns"])
grpc_stats = grpc.get_inference_statistics("demo-portable", "1")
check("statistics: gRPC answers the same numbers",
      json_format.MessageToDict(grpc_stats, preserving_proto_field_name=True)["model_stats"][0]["inference_count"]
      == str(after["inference_count"]))
every = http.get_inference_statistics()
check("statistics of every model list each serving version",
      {("demo-portable", "1"), ("batched", "1")} <= {(s["name"], s["version"]) for s in every["model_stats"]})

# Compressed requests as Triton's client sends them (request_compression_algorithm): the body
# gzip.compress'd or zlib.compress'd, Inference-Header-Content-Length that of the body before.
# An answer asked compressed (response_compression_algorithm) comes uncompressed, which it reads.
tol = ref["tolerance"]
for algorithm in ("gzip", "deflate"):
    for binary in (True, False):
        matched = []
        for c in ref["cases"]:
            i, o = c["inputs"][0], c["outputs"][0]
            x = httpclient.InferInput(i["name"], i["shape"], i["datatype"])
            x.set_data_from_numpy(np.array(i["data"], dtype=np.float32).reshape(i["shape"]), binary_data=binary)
            got = http.infer("demo-portable", [x], request_compression_algorithm=algorithm,
                             response_compression_algorithm=algorithm).as_numpy(o["name"])
            want = np.array(o["data"], dtype=np.float32).reshape(o["shape"])
            matched.append(got is not None and got.shape == want.shape
                           and np.allclose(got, want, atol=tol["atol"], rtol=tol["rtol"]))
        check(f"http: request_compression_algorithm={algorithm!r}, {'binary' if binary else 'JSON'} inputs,"
              " answers the PyTorch reference", all(matched), str(matched))

# Model Analyzer's remote mode: read the configuration, change it, load with it.
doc = http.get_model_config("plain")
config = json_format.ParseDict(doc, mc.ModelConfig())
config.max_batch_size = 4
config.dynamic_batching.max_queue_delay_microseconds = 200
del config.instance_group[:]
config.instance_group.add(count=3, kind=mc.ModelInstanceGroup.KIND_CPU)
for i in config.input:
    del i.dims[0]  # with max_batch_size > 0 the batch dimension is left out
for o in config.output:
    del o.dims[0]
http.load_model("plain", config=json.dumps(json_format.MessageToDict(config, preserving_proto_field_name=True)))
loaded = json_format.ParseDict(http.get_model_config("plain"), mc.ModelConfig())
check("load_model(config=...) over HTTP: instances and batching as asked", loaded.max_batch_size == 4
      and loaded.instance_group[0].count == 3 and loaded.dynamic_batching.max_queue_delay_microseconds == 200,
      json_format.MessageToJson(loaded)[:300])
bref = json.loads((models_dir / "dynamic-batch" / "1" / "reference.json").read_text())
bcase = bref["cases"][0]
x = httpclient.InferInput(bcase["inputs"][0]["name"], bcase["inputs"][0]["shape"], "FP32")
x.set_data_from_numpy(np.array(bcase["inputs"][0]["data"], dtype=np.float32).reshape(bcase["inputs"][0]["shape"]))
got = http.infer("plain", [x]).as_numpy(bcase["outputs"][0]["name"])
want = np.array(bcase["outputs"][0]["data"], dtype=np.float32).reshape(bcase["outputs"][0]["shape"])
check("the reloaded model answers its PyTorch reference", got is not None and got.shape == want.shape
      and np.allclose(got, want, atol=bref["tolerance"]["atol"], rtol=bref["tolerance"]["rtol"]))

grpc.load_model("plain", config=json.dumps({"max_batch_size": 0, "instance_group": [{"count": 1, "kind": "KIND_CPU"}]}))
loaded = grpc.get_model_config("plain").config
check("load_model(config=...) over gRPC: batching off, one instance", loaded.max_batch_size == 0
      and not loaded.HasField("dynamic_batching") and loaded.instance_group[0].count == 1)

status, message = refused(lambda: http.load_model("plain", config=json.dumps(
    {"sequence_batching": {"max_sequence_idle_microseconds": 1000}})))
check("a configuration that cannot be honoured is refused 400 naming the field (HTTP)",
      status == "400" and "sequence_batching" in message, f"{status} {message}")
status, message = refused(lambda: grpc.load_model("plain", config=json.dumps(
    {"instance_group": [{"count": 1, "kind": "KIND_GPU"}]})))
check("... and over gRPC (INVALID_ARGUMENT)", status == "StatusCode.INVALID_ARGUMENT"
      and "instance_group[0].kind" in message, f"{status} {message}")
status, message = refused(lambda: http.load_model("plain", config="{not json"))
check("malformed JSON is refused 400", status == "400" and "JSON" in message, f"{status} {message}")
http.load_model("plain")
check("a load without a configuration restores config.yml",
      http.get_model_config("plain")["instance_group"][0]["count"] == 1 and http.is_model_ready("plain"))
print("all checks passed")
