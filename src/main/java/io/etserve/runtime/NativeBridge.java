package io.etserve.runtime;

/**
 * The JNI surface of {@code libetserve_jni.so} (native/src/jni_bridge.cpp). Package-private:
 * the rest of the service goes through {@link Program}, {@link ProgramInstance} and
 * {@link CallerStreamInspector}. Every method throws {@link ExecuTorchException} on failure.
 */
final class NativeBridge {

    private NativeBridge() {}

    static native long openProgram(String path, int verification, String[] dataFiles);

    static native void closeProgram(long program);

    static native String[] methodNames(long program);

    /**
     * [numInputs, (tag, dtype, dynamism, planned, rank, dims...)*, numOutputs, (tag, dtype, dynamism, planned, rank,
     * dims...)*, numPlannedBuffers, bytes...].
     */
    static native long[] methodSignature(long program, String method);

    static native String[] methodBackends(long program, String method);

    /**
     * @param device the CUDA device the instance runs on (current while its delegates initialize), or -1
     * @param callerThreadOnly the method's CPU operators run on the calling thread, never on ExecuTorch's threadpool
     */
    static native long openInstance(long program, String method, int device, boolean callerThreadOnly);

    static native void closeInstance(long instance);

    /** How the instance's completion waits ended so far, and when the last one returned. */
    static native CompletionWaits instanceStats(long instance);

    /** {@link #methodSignature}'s encoding, with the loaded method's shape dynamism. */
    static native long[] instanceSignature(long instance);

    /**
     * Runs the instance's method on {@code call}'s inputs, read in place, under its stream
     * options; each output is copied once into the direct buffer {@code call.buffers} gives for
     * it. Sets {@code call.waitEnded} when it succeeds.
     */
    static native ExecutionOutput[] execute(long instance, ExecutionCall call);

    /** Flattened (path, soname) pairs of every loaded object that defines getCallerStream. */
    static native String[] callerStreamDefiners();

    /** [hasValue, handle] of the calling thread's caller-stream selection. */
    static native long[] observeCallerStream();

    static native String[] registeredBackends();

    /**
     * Sizes ExecuTorch's CPU threadpool to {@code requested} threads (0 leaves it) and returns its
     * size; only before any program loads (XNNPACK's runtimes keep the pool they were built with).
     */
    static native int cpuThreads(int requested);
}
