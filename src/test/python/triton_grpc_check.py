"""Triton's gRPC client against etserve: metadata, raw inference on the demo models against the
PyTorch references exported beside them, and every error code. Prints one line per check and
exits non-zero on the first failure. Usage: triton_grpc_check.py HOST:PORT MODELS_DIR"""
import json
import sys
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
from checks import check, refused

url, models_dir = sys.argv[1], Path(sys.argv[2])
client = grpcclient.InferenceServerClient(url=url)


check("server live", client.is_server_live())
check("server ready", client.is_server_ready())
meta = client.get_server_metadata()
check("server metadata", meta.name == "etserve" and "binary_tensor_data" in meta.extensions, str(meta.name))

for model in ("demo-portable", "demo-xnnpack"):
    check(f"{model} ready", client.is_model_ready(model))
    m = client.get_model_metadata(model)
    check(f"{model} metadata", m.name == model and m.platform == "executorch" and list(m.versions) == ["1"],
          f"inputs {[(t.name, t.datatype, list(t.shape)) for t in m.inputs]}")
    ref = json.loads((models_dir / model / "1" / "reference.json").read_text())
    atol, rtol = ref["tolerance"]["atol"], ref["tolerance"]["rtol"]
    for i, case in enumerate(ref["cases"]):
        inputs = []
        for t in case["inputs"]:
            x = grpcclient.InferInput(t["name"], t["shape"], t["datatype"])
            x.set_data_from_numpy(np.array(t["data"], dtype=np.float32).reshape(t["shape"]))
            inputs.append(x)
        outputs = [grpcclient.InferRequestedOutput(t["name"]) for t in case["outputs"]]
        result = client.infer(model, inputs, outputs=outputs, request_id=f"case-{i}")
        for t in case["outputs"]:
            got = result.as_numpy(t["name"])
            want = np.array(t["data"], dtype=np.float32).reshape(t["shape"])
            check(f"{model} case {i} output {t['name']} matches the PyTorch reference",
                  got is not None and got.shape == want.shape and np.allclose(got, want, atol=atol, rtol=rtol),
                  f"max |diff| {float(np.max(np.abs(got - want))) if got is not None else 'none'}")
        check(f"{model} case {i} id echoed", result.get_response().id == f"case-{i}")

x = grpcclient.InferInput("x", [1, 16], "FP32")
x.set_data_from_numpy(np.zeros((1, 16), dtype=np.float32))
code, message = refused(lambda: client.infer("no-such-model", [x]))
check("unknown model: NOT_FOUND", code == "StatusCode.NOT_FOUND", f"{code} {message}")
wrong = grpcclient.InferInput("x", [1, 8], "FP32")
wrong.set_data_from_numpy(np.zeros((1, 8), dtype=np.float32))
code, message = refused(lambda: client.infer("demo-portable", [wrong]))
check("wrong shape: INVALID_ARGUMENT", code == "StatusCode.INVALID_ARGUMENT", f"{code} {message}")
ints = grpcclient.InferInput("x", [1, 16], "INT32")
ints.set_data_from_numpy(np.zeros((1, 16), dtype=np.int32))
code, message = refused(lambda: client.infer("demo-portable", [ints]))
check("wrong datatype: INVALID_ARGUMENT", code == "StatusCode.INVALID_ARGUMENT", f"{code} {message}")
code, message = refused(lambda: client.infer("broken", [x]))
check("model that failed to load: UNAVAILABLE", code == "StatusCode.UNAVAILABLE", f"{code} {message}")
code, message = refused(lambda: client.get_model_metadata("no-such-model"))
check("metadata of an unknown model: NOT_FOUND", code == "StatusCode.NOT_FOUND", f"{code} {message}")
check("still ready after the refusals", client.is_server_ready())
print("all checks passed")
