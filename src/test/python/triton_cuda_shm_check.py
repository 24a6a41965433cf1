"""Triton's clients and their CUDA shared-memory utilities against etserve's CUDA shared-memory
extension, over HTTP and gRPC, on a host with a CUDA device: device memory allocated and filled
with tritonclient.utils.cuda_shared_memory (cuda-python), its IPC handle registered, an inference
whose input is read from one region (at an offset) and whose output is written into another,
compared with the PyTorch reference exported beside the model; then the status calls (by kind),
the refusals (a handle of nothing, a size past the allocation, a name of the other kind, too
little room for an output, an unregistered region), concurrent requests naming one region, and
the unregister calls. Prints one line per
check and exits non-zero on the first failure.
Usage: triton_cuda_shm_check.py HTTP_HOST:PORT GRPC_HOST:PORT MODELS_DIR [MODEL]"""
import base64
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.cuda_shared_memory as cudashm
from checks import check, refused

http_url, grpc_url, models_dir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
model = sys.argv[4] if len(sys.argv) > 4 else "demo-portable"
ref = json.loads((models_dir / model / "1" / "reference.json").read_text())
atol, rtol = ref["tolerance"]["atol"], ref["tolerance"]["rtol"]
case = ref["cases"][0]
x = np.array(case["inputs"][0]["data"], dtype=np.float32).reshape(case["inputs"][0]["shape"])
want = np.array(case["outputs"][0]["data"], dtype=np.float32).reshape(case["outputs"][0]["shape"])
input_name, output_name = case["inputs"][0]["name"], case["outputs"][0]["name"]
pad = np.full(16, -7.0, dtype=np.float32)  # 64 bytes before the input: it is read at an offset
invalid = ("400", "StatusCode.INVALID_ARGUMENT")
CONCURRENT_THREADS, CONCURRENT_REQUESTS = 8, 25  # 8 slices of the 256-byte output region

for protocol, module, client in (("http", httpclient, httpclient.InferenceServerClient(url=http_url)),
                                 ("grpc", grpcclient, grpcclient.InferenceServerClient(url=grpc_url))):
    client.unregister_cuda_shared_memory()
    client.unregister_system_shared_memory()
    extensions = client.get_server_metadata()["extensions"] if protocol == "http" \
        else client.get_server_metadata().extensions
    check(f"{protocol}: server metadata lists cuda_shared_memory", "cuda_shared_memory" in extensions)
    inputs = cudashm.create_shared_memory_region(f"{protocol}-in", pad.nbytes + x.nbytes, 0)
    outputs = cudashm.create_shared_memory_region(f"{protocol}-out", 256, 0)
    # A handle is opened once per process (CUDA's rule): the size check gets an allocation of its own.
    spare = cudashm.create_shared_memory_region(f"{protocol}-spare", 256, 0)
    try:
        cudashm.set_shared_memory_region(inputs, [pad, x])
        client.register_cuda_shared_memory("in", cudashm.get_raw_handle(inputs), 0, pad.nbytes + x.nbytes)
        client.register_cuda_shared_memory("out", cudashm.get_raw_handle(outputs), 0, 256)
        status = client.get_cuda_shared_memory_status()
        names = sorted(r["name"] for r in status) if protocol == "http" else sorted(status.regions)
        check(f"{protocol}: status lists both regions", names == ["in", "out"], str(names))
        one = client.get_cuda_shared_memory_status("out")
        size = one[0]["byte_size"] if protocol == "http" else one.regions["out"].byte_size
        check(f"{protocol}: a region's status has its byte size", int(size) == 256, str(one))
        system = client.get_system_shared_memory_status()
        check(f"{protocol}: the system status lists no CUDA region",
              (len(system) if protocol == "http" else len(system.regions)) == 0, str(system))

        given = module.InferInput(input_name, list(x.shape), "FP32")
        given.set_shared_memory("in", x.nbytes, offset=pad.nbytes)
        asked = module.InferRequestedOutput(output_name) if protocol == "grpc" \
            else module.InferRequestedOutput(output_name, binary_data=False)
        asked.set_shared_memory("out", 256)
        result = client.infer(model, [given], outputs=[asked])
        out = result.get_output(output_name)
        shape = list(out["shape"]) if protocol == "http" else list(out.shape)
        got = cudashm.get_contents_as_numpy(outputs, np.float32, shape)
        check(f"{protocol}: output written to device memory matches the PyTorch reference",
              got.shape == want.shape and np.allclose(got, want, atol=atol, rtol=rtol),
              f"max |diff| {float(np.max(np.abs(got - want)))}" if got.shape == want.shape else str(got.shape))

        plain = client.infer(model, [given]).as_numpy(output_name)
        check(f"{protocol}: input read from device memory at an offset gives the reference answer",
              plain is not None and np.allclose(plain, want, atol=atol, rtol=rtol))

        # Refusals: each names what is wrong; nothing is registered by them.
        code, message = refused(lambda: client.register_cuda_shared_memory(
            "bad", base64.b64encode(bytes(64)), 0, 64))
        check(f"{protocol}: a handle of no allocation is refused", code in invalid and "could not be opened" in message,
              f"{code} {message}")
        code, message = refused(lambda: client.register_cuda_shared_memory(
            "big", cudashm.get_raw_handle(spare), 0, 1 << 30))
        check(f"{protocol}: a byte size past the allocation is refused",
              code in invalid and "the handle's allocation holds" in message, f"{code} {message}")
        code, message = refused(lambda: client.register_cuda_shared_memory(
            "in", cudashm.get_raw_handle(outputs), 0, 256))
        check(f"{protocol}: a name in use is refused", code in invalid and "registered already" in message,
              f"{code} {message}")
        code, message = refused(lambda: client.get_system_shared_memory_status("in"))
        check(f"{protocol}: a CUDA region is not a system one",
              code in ("400", "404", "StatusCode.NOT_FOUND") and "registered as CUDA shared memory" in message,
              f"{code} {message}")

        small = module.InferRequestedOutput(output_name)
        small.set_shared_memory("out", want.nbytes - 1)
        code, message = refused(lambda: client.infer(model, [given], outputs=[small]))
        check(f"{protocol}: too little room for an output is refused", code in invalid and "more than the" in message,
              f"{code} {message}")

        # The system calls leave CUDA regions alone.
        client.unregister_system_shared_memory()
        client.unregister_system_shared_memory("in")
        status = client.get_cuda_shared_memory_status()
        check(f"{protocol}: the system unregister leaves CUDA regions",
              (len(status) if protocol == "http" else len(status.regions)) == 2)
        client.unregister_cuda_shared_memory("in")
        code, message = refused(lambda: client.infer(model, [given]))
        check(f"{protocol}: an unregistered region is refused", code in invalid and "not registered" in message,
              f"{code} {message}")
        # Its handle was closed: registered again, it serves again.
        client.register_cuda_shared_memory("in", cudashm.get_raw_handle(inputs), 0, pad.nbytes + x.nbytes)
        again = client.infer(model, [given]).as_numpy(output_name)
        check(f"{protocol}: a handle registered again after its unregister serves",
              again is not None and np.allclose(again, want, atol=atol, rtol=rtol))

        # Concurrent requests naming one input region, as perf_analyzer sends them, each thread
        # writing its own slice of the output region: every answer is the reference's.
        def requests_of_one_thread(t):
            own = module.InferenceServerClient(url=http_url if protocol == "http" else grpc_url)
            given = module.InferInput(input_name, list(x.shape), "FP32")
            given.set_shared_memory("in", x.nbytes, offset=pad.nbytes)
            asked = module.InferRequestedOutput(output_name) if protocol == "grpc" \
                else module.InferRequestedOutput(output_name, binary_data=False)
            asked.set_shared_memory("out", want.nbytes, offset=t * want.nbytes)
            wrong = 0
            for _ in range(CONCURRENT_REQUESTS):
                own.infer(model, [given], outputs=[asked])
                answer = own.infer(model, [given]).as_numpy(output_name)
                wrong += answer is None or not np.allclose(answer, want, atol=atol, rtol=rtol)
            own.close()
            return wrong
        with ThreadPoolExecutor(CONCURRENT_THREADS) as threads:
            wrong = sum(threads.map(requests_of_one_thread, range(CONCURRENT_THREADS)))
        slices = cudashm.get_contents_as_numpy(outputs, np.float32, [CONCURRENT_THREADS] + list(want.shape))
        check(f"{protocol}: {CONCURRENT_THREADS} threads reading one region at once get the reference answer",
              wrong == 0 and np.allclose(slices, np.broadcast_to(want, slices.shape), atol=atol, rtol=rtol),
              f"{wrong} wrong answers of {2 * CONCURRENT_THREADS * CONCURRENT_REQUESTS}")

        client.unregister_cuda_shared_memory()
        status = client.get_cuda_shared_memory_status()
        check(f"{protocol}: unregister with no name unregisters every CUDA region",
              (len(status) if protocol == "http" else len(status.regions)) == 0)
    finally:
        cudashm.destroy_shared_memory_region(inputs)
        cudashm.destroy_shared_memory_region(outputs)
        cudashm.destroy_shared_memory_region(spare)
print("all checks passed")
