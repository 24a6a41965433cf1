package io.etserve.bench;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.cuda.cudart.cudaIpcMemHandle_t;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Device memory the load generator allocates on device 0 and exports as CUDA IPC handles, for
 * Triton's CUDA shared memory (JavaCPP's CUDA runtime): what a client whose tensors are on the
 * GPU registers with the service. Freed on close.
 */
final class DeviceAllocations implements AutoCloseable {

    /** One allocation: its device pointer, size and the IPC handle that exports it. */
    record Allocation(Pointer pointer, long bytes, byte[] handle) {}

    private final List<Pointer> allocated = new ArrayList<>();

    /** A new allocation holding {@code contents}. */
    synchronized Allocation allocate(byte[] contents) {
        check("cudaSetDevice", cudart.cudaSetDevice(0));
        Pointer device = new Pointer();
        check("cudaMalloc", cudart.cudaMalloc(device, contents.length));
        allocated.add(device);
        try (BytePointer host = new BytePointer(contents)) {
            check("cudaMemcpy", cudart.cudaMemcpy(device, host, contents.length, cudart.cudaMemcpyHostToDevice));
        }
        try (cudaIpcMemHandle_t handle = new cudaIpcMemHandle_t()) {
            check("cudaIpcGetMemHandle", cudart.cudaIpcGetMemHandle(handle, device));
            byte[] bytes = new byte[64];
            handle.reserved().get(bytes);
            return new Allocation(device, contents.length, bytes);
        }
    }

    /** The allocation's bytes as they are now on the device. */
    byte[] read(Allocation a) {
        byte[] out = new byte[Math.toIntExact(a.bytes())];
        try (BytePointer host = new BytePointer(a.bytes())) {
            check("cudaMemcpy", cudart.cudaMemcpy(host, a.pointer(), a.bytes(), cudart.cudaMemcpyDeviceToHost));
            host.get(out);
        }
        return out;
    }

    @Override
    public synchronized void close() {
        for (Pointer p : allocated) {
            cudart.cudaFree(p);
        }
        allocated.clear();
    }

    private static void check(String call, int rc) {
        if (rc != 0) {
            throw new IllegalStateException(call + " failed: " + cudart.cudaGetErrorName(rc).getString());
        }
    }
}
