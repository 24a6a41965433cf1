package io.etserve.runtime;

import java.nio.ByteBuffer;

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
     * [numInputs, (tag, dtype, dynamism, rank, dims...)*, numOutputs, (tag, dtype, dynamism, rank,
     * dims...)*, numPlannedBuffers, bytes...].
     */
    static native long[] methodSignature(long program, String method);

    static native String[] methodBackends(long program, String method);

    /** @param device the CUDA device the instance runs on (current while its delegates initialize), or -1 */
    static native long openInstance(long program, String method, int device);

    static native void closeInstance(long instance);

    /** [done at start, overslept, seen in the spin, seen in the back-off, when the last wait returned (ns)]. */
    static native long[] instanceWaitStats(long instance);

    /** How the last call's adaptive wait ended: a {@link CompletionWaits.Ended} ordinal. */
    static native int instanceLastWait(long instance);

    /** {@link #methodSignature}'s encoding, with the loaded method's shape dynamism. */
    static native long[] instanceSignature(long instance);

    /**
     * Runs the instance's method. Inputs are direct buffers read in place (each from its address:
     * pass slices, not buffers with a position); each output is copied once into the direct
     * buffer {@code outputs} gives for it, their dtypes and shapes written into the two out-arrays.
     */
    static native ByteBuffer[] execute(long instance, ByteBuffer[] inputs, int[] dtypes, long[][] shapes,
            int streamMode, long stream, int device, int[] outDtypes, long[][] outShapes, OutputBuffers outputs);

    /** Flattened (path, soname) pairs of every loaded object that defines getCallerStream. */
    static native String[] callerStreamDefiners();

    /** [hasValue, handle] of the calling thread's caller-stream selection. */
    static native long[] observeCallerStream();

    static native String[] registeredBackends();
}
