package io.etserve.sharedmemory;

import io.etserve.cuda.CudaException;
import io.etserve.cuda.ImportedDeviceMemory;
import io.etserve.execution.FaultListener;
import java.nio.ByteBuffer;
import java.util.OptionalInt;

/**
 * A CUDA shared-memory region: the first {@code byteSize} bytes of device memory another process
 * exported (its IPC handle, opened at registration). Inputs are copied out of it into the
 * request's own buffers and outputs into it from theirs. A copy's CUDA failure is told to the
 * fault listener with the region's device, as a forward call's is: a sticky error there (the
 * context is lost) takes the device out of service, where it would otherwise wait for the next
 * forward call to be seen.
 */
final class CudaRegion extends Region {

    private final ImportedDeviceMemory memory;
    private final FaultListener faults;

    CudaRegion(String name, long byteSize, ImportedDeviceMemory memory, FaultListener faults) {
        super(name, byteSize);
        this.memory = memory;
        this.faults = faults;
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
            copyToHost(at, into);
            return;
        }
        ByteBuffer direct = ByteBuffer.allocateDirect(into.remaining());
        copyToHost(at, direct);
        into.put(direct.flip());
    }

    @Override
    void write(String label, ByteBuffer from, long at) {
        ByteBuffer bytes = from;
        if (!from.isDirect()) {
            bytes = ByteBuffer.allocateDirect(from.remaining()).put(from).flip();
        }
        copyFromHost(bytes, at);
    }

    private void copyFromHost(ByteBuffer from, long at) {
        try {
            memory.copyFromHost(from, at);
        } catch (CudaException e) {
            throw reported(e);
        }
    }

    private void copyToHost(long at, ByteBuffer into) {
        try {
            memory.copyToHost(at, into);
        } catch (CudaException e) {
            throw reported(e);
        }
    }

    /** {@code e}, once the fault listener has been told of it. */
    private CudaException reported(CudaException e) {
        faults.onRuntimeFailure(OptionalInt.of(memory.device()), e);
        return e;
    }

    @Override
    void release() {
        memory.close();
    }
}
