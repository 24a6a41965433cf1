package io.etserve.cuda;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.cudart.cudaIpcMemHandle_t;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.SizeTPointer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Opens CUDA IPC handles of other processes' device memory through the CUDA runtime (JavaCPP),
 * as Triton's server does for its CUDA shared memory: {@code cudaIpcOpenMemHandle} on the
 * handle's device, the allocation's size from the driver ({@code cuMemGetAddressRange}) so that no
 * region can claim more than was allocated, and copies on non-blocking streams, never the legacy
 * default stream, which would wait for every blocking stream's work.
 *
 * <p>Each copy borrows a stream of its device for itself and waits for that stream only, so no
 * copy waits for another request's, those naming the same region included (Triton's
 * perf_analyzer sends every concurrent request's inputs from one region). The streams are kept
 * for the next copies, as many per device as copies ever ran at once, and destroyed by
 * {@link #close}.
 */
public final class CudaIpc implements ImportedDeviceMemory.Opener {

    private static final Logger log = LoggerFactory.getLogger(CudaIpc.class);

    private final CudaRuntime runtime;
    /** Copy streams no copy holds, by device; guarded by itself. */
    private final Map<Integer, ArrayDeque<CUstream_st>> idleStreams = new HashMap<>();
    private boolean closed;  // guarded by idleStreams

    public CudaIpc(CudaRuntime runtime) {
        if (!runtime.available()) {
            throw new IllegalArgumentException("CUDA IPC needs a CUDA device");
        }
        this.runtime = runtime;
    }

    @Override
    public ImportedDeviceMemory open(byte[] handle, int device) {
        if (handle.length != ImportedDeviceMemory.HANDLE_BYTES) {
            throw new IllegalArgumentException("a CUDA IPC handle has " + ImportedDeviceMemory.HANDLE_BYTES
                    + " bytes, not " + handle.length);
        }
        if (device < 0 || device >= runtime.devices().size()) {
            throw new IllegalArgumentException("device " + device + " is not one of this host's "
                    + runtime.devices().size() + " CUDA devices");
        }
        synchronized (CudaRuntime.class) {
            CudaRuntime.check("cudaSetDevice", cudart.cudaSetDevice(device));
            Pointer base = new Pointer();
            try (cudaIpcMemHandle_t h = new cudaIpcMemHandle_t()) {
                h.reserved().put(handle, 0, handle.length);
                int rc = cudart.cudaIpcOpenMemHandle(base, h, cudart.cudaIpcMemLazyEnablePeerAccess);
                if (rc != 0) {
                    // A handle of no live allocation, of this process, or of another device.
                    CudaRuntime.clearLastError();
                    throw new IllegalArgumentException("the CUDA IPC handle could not be opened on device " + device
                            + ": " + CudaRuntime.errorName(rc));
                }
            }
            long bytes;
            try (SizeTPointer size = new SizeTPointer(1)) {
                int rc = cudart.cuMemGetAddressRange((long[]) null, size, base.address());
                if (rc != 0) {
                    closeQuietly(base);
                    throw new IllegalStateException("cuMemGetAddressRange of an opened CUDA IPC handle failed: CUresult "
                            + rc);
                }
                bytes = size.get();
            }
            return new Opened(device, base.address(), bytes);
        }
    }

    /** An idle copy stream of {@code device}, or a new one. */
    private CUstream_st borrowStream(int device) {
        synchronized (idleStreams) {
            if (closed) {
                throw new IllegalStateException("CUDA shared memory is closed: the service is stopping");
            }
            ArrayDeque<CUstream_st> idle = idleStreams.get(device);
            if (idle != null && !idle.isEmpty()) {
                return idle.pop();
            }
        }
        synchronized (CudaRuntime.class) {
            CudaRuntime.check("cudaSetDevice", cudart.cudaSetDevice(device));
            CUstream_st stream = new CUstream_st();
            CudaRuntime.check("cudaStreamCreateWithFlags",
                    cudart.cudaStreamCreateWithFlags(stream, cudart.cudaStreamNonBlocking));
            return stream;
        }
    }

    /** Keeps {@code stream} for the next copy on {@code device}, or destroys it once closed. */
    private void returnStream(int device, CUstream_st stream) {
        synchronized (idleStreams) {
            if (!closed) {
                idleStreams.computeIfAbsent(device, d -> new ArrayDeque<>()).push(stream);
                return;
            }
        }
        destroyQuietly(device, stream);
    }

    /**
     * Destroys the idle copy streams; a copy still running destroys its own when done. Regions
     * are closed first ({@code SharedMemoryRegions.close}): no copy starts after this.
     */
    @Override
    public void close() {
        Map<Integer, ArrayDeque<CUstream_st>> idle;
        synchronized (idleStreams) {
            if (closed) {
                return;
            }
            closed = true;
            idle = new HashMap<>(idleStreams);
            idleStreams.clear();
        }
        idle.forEach((device, streams) -> streams.forEach(s -> destroyQuietly(device, s)));
    }

    private static void destroyQuietly(int device, CUstream_st stream) {
        synchronized (CudaRuntime.class) {
            int rc = cudart.cudaSetDevice(device);
            if (rc == 0) {
                rc = cudart.cudaStreamDestroy(stream);
            }
            if (rc != 0) {
                CudaRuntime.clearLastError();
                log.warn("a CUDA IPC copy stream on device {} could not be destroyed: {}", device,
                        CudaRuntime.errorName(rc));
            }
        }
    }

    private static void closeQuietly(Pointer base) {
        int rc = cudart.cudaIpcCloseMemHandle(base);
        if (rc != 0) {
            CudaRuntime.clearLastError();
            log.warn("cudaIpcCloseMemHandle failed: {}", CudaRuntime.errorName(rc));
        }
    }

    /** A raw device address as JavaCPP passes it (position 0: the address itself). */
    private static Pointer at(long deviceAddress) {
        return new Pointer() {
            {
                address = deviceAddress;
            }
        };
    }

    private final class Opened implements ImportedDeviceMemory {
        private final int device;
        private final long base;
        private final long bytes;
        private boolean closed;  // guarded by this

        Opened(int device, long base, long bytes) {
            this.device = device;
            this.base = base;
            this.bytes = bytes;
        }

        @Override
        public int device() {
            return device;
        }

        @Override
        public long allocationBytes() {
            return bytes;
        }

        @Override
        public void copyToHost(long offset, ByteBuffer into) {
            int n = into.remaining();
            copy(new BytePointer(into), at(base + within(offset, n)), n);
            into.position(into.position() + n);
        }

        @Override
        public void copyFromHost(ByteBuffer from, long offset) {
            int n = from.remaining();
            copy(at(base + within(offset, n)), new BytePointer(from), n);
            from.position(from.position() + n);
        }

        private long within(long offset, int n) {
            if (offset < 0 || offset > bytes - n) {
                throw new IllegalArgumentException(n + " bytes at " + offset + " reach past the " + bytes
                        + " bytes of the CUDA IPC allocation");
            }
            return offset;
        }

        /**
         * One copy, on a stream of its own, waited for. The calling thread's current device is
         * set to the memory's: forward calls set their own before they run.
         */
        private void copy(Pointer to, Pointer from, long n) {
            if (n == 0) {
                return;
            }
            CUstream_st stream = borrowStream(device);
            try {
                CudaRuntime.check("cudaSetDevice", cudart.cudaSetDevice(device));
                CudaRuntime.check("cudaMemcpyAsync",
                        cudart.cudaMemcpyAsync(to, from, n, cudart.cudaMemcpyDefault, stream));
                CudaRuntime.check("cudaStreamSynchronize", cudart.cudaStreamSynchronize(stream));
            } finally {
                returnStream(device, stream);
            }
        }

        /** Closes the handle (once); a failure is logged, never thrown: nothing can be done then. */
        @Override
        public synchronized void close() {
            if (closed) {
                return;
            }
            closed = true;
            synchronized (CudaRuntime.class) {
                int rc = cudart.cudaSetDevice(device);
                if (rc != 0) {
                    CudaRuntime.clearLastError();
                    log.warn("device {} of a CUDA IPC region could not be made current to close it: {}", device,
                            CudaRuntime.errorName(rc));
                }
                closeQuietly(at(base));
            }
        }
    }
}
