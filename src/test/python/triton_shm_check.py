"""Triton's clients and their shared-memory utilities against etserve's system shared-memory
extension, over HTTP and gRPC: regions created and filled with tritonclient.utils.shared_memory,
registered, an inference whose input is read from one region and whose output is written into
another, compared with the PyTorch reference exported beside the model; then the status and
unregister calls, and the refusals of an unknown region and of too little room. Prints one line
per check and exits non-zero on the first failure.
Usage: triton_shm_check.py HTTP_HOST:PORT GRPC_HOST:PORT MODELS_DIR"""
import json
import os
import sys
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from checks import check, refused

http_url, grpc_url, models_dir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
ref = json.loads((models_dir / "demo-portable" / "1" / "reference.json").read_text())
atol, rtol = ref["tolerance"]["atol"], ref["tolerance"]["rtol"]
case = ref["cases"][0]
x = np.array(case["inputs"][0]["data"], dtype=np.float32).reshape(case["inputs"][0]["shape"])
want = np.array(case["outputs"][0]["data"], dtype=np.float32).reshape(case["outputs"][0]["shape"])
tag = f"etserve-check-{os.getpid()}"

for protocol, module, client in (("http", httpclient, httpclient.InferenceServerClient(url=http_url)),
                                 ("grpc", grpcclient, grpcclient.InferenceServerClient(url=grpc_url))):
    client.unregister_system_shared_memory()
    extensions = client.get_server_metadata()["extensions"] if protocol == "http" \
        else client.get_server_metadata().extensions
    check(f"{protocol}: server metadata lists system_shared_memory", "system_shared_memory" in extensions)
    inputs = shm.create_shared_memory_region(f"{tag}-{protocol}-in", f"/{tag}-{protocol}-in", x.nbytes)
    outputs = shm.create_shared_memory_region(f"{tag}-{protocol}-out", f"/{tag}-{protocol}-out", 256)
    try:
        shm.set_shared_memory_region(inputs, [x])
        client.register_system_shared_memory("in", f"/{tag}-{protocol}-in", x.nbytes)
        client.register_system_shared_memory("out", f"/{tag}-{protocol}-out", 256)
        status = client.get_system_shared_memory_status()
        names = sorted(r["name"] for r in status) if protocol == "http" else sorted(status.regions)
        check(f"{protocol}: status lists both regions", names == ["in", "out"], str(names))

        given = module.InferInput("x", list(x.shape), "FP32")
        given.set_shared_memory("in", x.nbytes)
        asked = module.InferRequestedOutput("y") if protocol == "grpc" \
            else module.InferRequestedOutput("y", binary_data=False)
        asked.set_shared_memory("out", want.nbytes, offset=64)
        result = client.infer("demo-portable", [given], outputs=[asked])
        out = result.get_output("y")
        shape = list(out["shape"]) if protocol == "http" else list(out.shape)
        got = shm.get_contents_as_numpy(outputs, np.float32, shape, offset=64)
        check(f"{protocol}: output written to shared memory matches the PyTorch reference",
              got.shape == want.shape and np.allclose(got, want, atol=atol, rtol=rtol),
              f"max |diff| {float(np.max(np.abs(got - want)))}")

        # The input from shared memory, the output in the answer.
        plain = client.infer("demo-portable", [given]).as_numpy("y")
        check(f"{protocol}: input read from shared memory gives the reference answer",
              plain is not None and np.allclose(plain, want, atol=atol, rtol=rtol))

        small = module.InferRequestedOutput("y")
        small.set_shared_memory("out", want.nbytes - 1)
        code, message = refused(lambda: client.infer("demo-portable", [given], outputs=[small]))
        check(f"{protocol}: too little room for an output is refused",
              code in ("400", "StatusCode.INVALID_ARGUMENT") and "more than the" in message, f"{code} {message}")

        client.unregister_system_shared_memory("in")
        code, message = refused(lambda: client.infer("demo-portable", [given]))
        check(f"{protocol}: an unregistered region is refused",
              code in ("400", "StatusCode.INVALID_ARGUMENT") and "not registered" in message, f"{code} {message}")
        client.unregister_system_shared_memory()
        status = client.get_system_shared_memory_status()
        check(f"{protocol}: unregister with no name unregisters every region",
              (len(status) if protocol == "http" else len(status.regions)) == 0)
    finally:
        shm.destroy_shared_memory_region(inputs)
        shm.destroy_shared_memory_region(outputs)
print("all checks passed")
