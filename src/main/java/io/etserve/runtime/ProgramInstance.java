package io.etserve.runtime;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One ExecuTorch {@code Module} over a shared {@link Program}: the unit of concurrency.
 *
 * <p>Not thread-safe by nature; the pools hand an instance to one caller at a time, and
 * this class refuses a second concurrent call instead of corrupting memory. {@link #close()}
 * waits for a running call to finish, so a Module is never freed under native work.
 */
public final class ProgramInstance implements AutoCloseable {

    private final MethodSignature signature;
    private final ReentrantLock inUse = new ReentrantLock();
    /** Held to free the handle, and to read the wait statistics without holding {@link #inUse}. */
    private final Object lifetime = new Object();
    private volatile CompletionWaits.Ended lastAdaptiveWait = CompletionWaits.Ended.NONE;
    private volatile long handle;

    ProgramInstance(long handle, MethodSignature signature) {
        this.handle = handle;
        this.signature = signature;
    }

    public MethodSignature signature() {
        return signature;
    }

    /** Runs the method on {@code inputs} under {@code stream}; outputs are fresh Java-owned copies. */
    public List<ExecutionOutput> execute(List<ExecutionInput> inputs, StreamSelection stream) {
        return execute(inputs, stream, OutputBuffers.ALLOCATE);
    }

    /**
     * Runs the method on {@code inputs} under {@code stream}; each output is copied once into the
     * direct buffer {@code outputs} hands out for it.
     */
    public List<ExecutionOutput> execute(List<ExecutionInput> inputs, StreamSelection stream, OutputBuffers outputs) {
        if (!inUse.tryLock()) {
            throw new IllegalStateException("a ProgramInstance is not thread-safe; it is already executing");
        }
        try {
            long h = handle;
            if (h == 0) {
                throw new InstanceClosedException();
            }
            int n = inputs.size();
            ByteBuffer[] buffers = new ByteBuffer[n];
            int[] dtypes = new int[n];
            long[][] shapes = new long[n][];
            for (int i = 0; i < n; i++) {
                ExecutionInput in = inputs.get(i);
                // The bridge reads from a buffer's address, i.e. from index 0: a buffer with a
                // position is passed as its slice.
                buffers[i] = in.data().position() == 0 ? in.data() : in.data().slice();
                dtypes[i] = in.scalarType();
                shapes[i] = in.shape();
            }
            int outputCount = signature.outputs().size();
            int[] outTypes = new int[outputCount];
            long[][] outShapes = new long[outputCount][];
            ByteBuffer[] data;
            try {
                data = NativeBridge.execute(h, buffers, dtypes, shapes, stream.nativeMode(), stream.handle(),
                        stream.device(), outTypes, outShapes, outputs);
            } finally {
                lastAdaptiveWait = stream.mode() == StreamSelection.Mode.CUDA
                        && stream.completionWait() == StreamSelection.CompletionWait.ADAPTIVE
                        ? CompletionWaits.Ended.ofNative(NativeBridge.instanceLastWait(h)) : CompletionWaits.Ended.NONE;
            }
            List<ExecutionOutput> result = new ArrayList<>(data.length);
            for (int i = 0; i < data.length; i++) {
                result.add(new ExecutionOutput(outTypes[i], outShapes[i], data[i]));
            }
            return result;
        } finally {
            inUse.unlock();
        }
    }

    /**
     * How this instance's GPU completion waits ended so far (all zero for CPU calls). Never blocks
     * or disturbs a running call: the native counts are atomics, and only {@link #close()} is
     * kept out while they are read.
     */
    public CompletionWaits completionWaits() {
        synchronized (lifetime) {
            long h = handle;
            if (h == 0) {
                throw new InstanceClosedException();
            }
            long[] s = NativeBridge.instanceWaitStats(h);
            return new CompletionWaits(s[0], s[1], s[2], s[3], s[4]);
        }
    }

    /**
     * How the last call's adaptive completion wait ended ({@link CompletionWaits.Ended#NONE} when it
     * did not wait adaptively): read by {@link #execute} after each GPU call that waited so.
     */
    public CompletionWaits.Ended lastAdaptiveWait() {
        return lastAdaptiveWait;
    }

    /** The instance was freed (the model is unloading, e.g. at shutdown). */
    public static final class InstanceClosedException extends IllegalStateException {
        InstanceClosedException() {
            super("the model's instance has been released (the model is unloading)");
        }
    }

    @Override
    public void close() {
        inUse.lock();
        try {
            synchronized (lifetime) {
                if (handle != 0) {
                    NativeBridge.closeInstance(handle);
                    handle = 0;
                }
            }
        } finally {
            inUse.unlock();
        }
    }
}
