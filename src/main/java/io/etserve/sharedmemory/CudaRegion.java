package io.etserve.sharedmemory;

import io.etserve.cuda.ImportedDeviceMemory;
import java.nio.ByteBuffer;

/**
 * A CUDA shared-memory region: the first {@code byteSize} bytes of device memory another process
 * exported (its IPC handle, opened at registration). Inputs are copied out of it into the
 * request's own buffers and outputs into it from theirs, on the memory's own stream.
 */
final class CudaRegion extends Region {

    private final ImportedDeviceMemory memory;

    CudaRegion(String name, long byteSize, ImportedDeviceMemory memory) {
        super(name, byteSize);
        this.memory = memory;
    }

    int device() {
        return memory.device();
    }

    @Override
    boolean cuda() {
        return true;
    }

    @Override
    void read(String label, ByteBuffer into, long at) {
        if (into.isDirect()) {
            memory.copyToHost(at, into);
            return;
        }
        ByteBuffer direct = ByteBuffer.allocateDirect(into.remaining());
        memory.copyToHost(at, direct);
        into.put(direct.flip());
    }

    @Override
    void write(String label, ByteBuffer from, long at) {
        ByteBuffer bytes = from;
        if (!from.isDirect()) {
            bytes = ByteBuffer.allocateDirect(from.remaining()).put(from).flip();
        }
        memory.copyFromHost(bytes, at);
    }

    @Override
    void release() {
        memory.close();
    }
}
