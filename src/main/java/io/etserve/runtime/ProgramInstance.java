package io.etserve.runtime;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One ExecuTorch {@code Module} over a shared {@link Program}: the unit of concurrency.
 *
 * <p>Not thread-safe by nature; the pools hand an instance to one caller at a time, and
 * this class refuses a second concurrent call instead of corrupting memory. {@link #close()}
 * waits for a running call to finish, so a Module is never freed under native work (nor ever,
 * once a call left GPU work running in it).
 */
public final class ProgramInstance implements AutoCloseable {

    private final MethodSignature signature;
    private final boolean cpuThreadpool;
    private final ReentrantLock inUse = new ReentrantLock();
    /** Held to free the handle, and to read the wait statistics without holding {@link #inUse}. */
    private final Object lifetime = new Object();
    /** The bridge's view of the running call, reused: calls never overlap ({@link #inUse}). */
    private final ExecutionCall call = new ExecutionCall();
    private volatile CompletionWaits.Ended lastAdaptiveWait = CompletionWaits.Ended.NONE;
    /** Set once a call gave up waiting for its GPU work: see {@link #leftGpuWorkRunning()}. */
    private volatile boolean leftGpuWorkRunning;
    private volatile long handle;

    ProgramInstance(long handle, MethodSignature signature, boolean cpuThreadpool) {
        this.handle = handle;
        this.signature = signature;
        this.cpuThreadpool = cpuThreadpool;
    }

    public MethodSignature signature() {
        return signature;
    }

    /** Whether its CPU operators split their work over ExecuTorch's threadpool, or run on the calling thread. */
    public boolean cpuThreadpool() {
        return cpuThreadpool;
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
        // The lock is reentrant: a call from inside this one (an OutputBuffers that runs the
        // instance again) would take it too and repoint the running call's outputs.
        if (inUse.isHeldByCurrentThread() || !inUse.tryLock()) {
            throw new IllegalStateException("a ProgramInstance is not thread-safe; it is already executing");
        }
        try {
            long h = handle;
            if (h == 0) {
                throw new InstanceClosedException();
            }
            try {
                call.start(inputs, stream, outputs);
                return Arrays.asList(NativeBridge.execute(h, call));
            } catch (ExecuTorchException e) {
                // Known before the instance is free again: whoever takes or closes it next must not wait on that work.
                if (e.leftGpuWorkRunning()) {
                    leftGpuWorkRunning = true;
                }
                throw e;
            } finally {
                lastAdaptiveWait = call.waitEnded();
                call.finish();
            }
        } finally {
            inUse.unlock();
        }
    }

    /**
     * Whether a call gave up waiting for its GPU work (etserve.cuda.completion-timeout): that work
     * may still run in this instance's device memory and on the stream it was given, forever if
     * the device hung. Such an instance is never freed (freeing device memory waits for the
     * device's work); its stream must not be waited for either.
     */
    public boolean leftGpuWorkRunning() {
        return leftGpuWorkRunning;
    }

    /**
     * How this instance's GPU completion waits ended so far (all zero for CPU calls), for
     * benchmarks and diagnostics. Never blocks or disturbs a running call: the native counts are
     * atomics, and only {@link #close()} is kept out while they are read.
     */
    public CompletionWaits stats() {
        synchronized (lifetime) {
            long h = handle;
            if (h == 0) {
                throw new InstanceClosedException();
            }
            return NativeBridge.instanceStats(h);
        }
    }

    /**
     * How the last call's adaptive completion wait ended ({@link CompletionWaits.Ended#NONE} when it
     * failed or did not wait adaptively), as the bridge reported it with the call's outputs.
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
        if (inUse.isHeldByCurrentThread()) {
            // From inside its own call (an OutputBuffers): freeing it there would free the Module under that call.
            throw new IllegalStateException("a ProgramInstance cannot be closed from inside its own call");
        }
        inUse.lock();
        try {
            synchronized (lifetime) {
                if (handle != 0 && !leftGpuWorkRunning) {
                    NativeBridge.closeInstance(handle);
                }
                handle = 0;  // left to the process's exit when work of a call may still run in it
            }
        } finally {
            inUse.unlock();
        }
    }
}
