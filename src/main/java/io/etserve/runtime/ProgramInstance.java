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
            ByteBuffer[] data = NativeBridge.execute(h, buffers, dtypes, shapes, stream.nativeMode(),
                    stream.handle(), stream.device(), outTypes, outShapes, outputs);
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
     * How this instance's GPU completion waits ended so far (all zero for CPU calls); waits for a
     * running call to finish.
     */
    public CompletionWaits completionWaits() {
        inUse.lock();
        try {
            if (handle == 0) {
                throw new InstanceClosedException();
            }
            long[] s = NativeBridge.instanceWaitStats(handle);
            return new CompletionWaits(s[0], s[1], s[2], s[3], s[4]);
        } finally {
            inUse.unlock();
        }
    }

    /**
     * How the last call's adaptive completion wait ended ({@link CompletionWaits.Ended#NONE} when it
     * did not wait adaptively); for the thread that just ran it, before giving the instance back.
     */
    public CompletionWaits.Ended lastAdaptiveWait() {
        inUse.lock();
        try {
            long h = handle;
            return h == 0 ? CompletionWaits.Ended.NONE : CompletionWaits.Ended.ofNative(NativeBridge.instanceWaitStats(h)[5]);
        } finally {
            inUse.unlock();
        }
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
            if (handle != 0) {
                NativeBridge.closeInstance(handle);
                handle = 0;
            }
        } finally {
            inUse.unlock();
        }
    }
}
