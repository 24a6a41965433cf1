package io.etserve.runtime;

/**
 * How one forward call meets CUDA streams. The bridge opens ExecuTorch's
 * {@code CallerStreamGuard} for the handle, runs the method, and (for {@link Mode#CUDA})
 * waits for the stream, all inside one native call.
 */
public record StreamSelection(Mode mode, long handle, int device) {

    public enum Mode {
        /** No guard: each delegate picks its own stream. */
        NONE,
        /** Guard only, no CUDA calls: opaque handles on hosts without a GPU. */
        SELECT_ONLY,
        /** Make the device current, guard, run, then wait for the stream. */
        CUDA
    }

    private static final StreamSelection NONE = new StreamSelection(Mode.NONE, 0, 0);

    public static StreamSelection none() {
        return NONE;
    }

    public static StreamSelection selectOnly(long handle) {
        return new StreamSelection(Mode.SELECT_ONLY, handle, 0);
    }

    public static StreamSelection cuda(long handle, int device) {
        return new StreamSelection(Mode.CUDA, handle, device);
    }
}
