package io.etserve.runtime;

import java.util.OptionalInt;

/**
 * How one forward call meets CUDA streams. The bridge opens ExecuTorch's
 * {@code CallerStreamGuard} for the handle, runs the method, and (for {@link Mode#CUDA})
 * waits for the stream, all inside one native call.
 */
public record StreamSelection(Mode mode, long handle, int device, CompletionWait completionWait, int sleepSliceMicros,
        int waitTimeoutMillis) {

    /** The longest sleep slice accepted (65 ms; a slice is meant to be tens of microseconds). */
    public static final int MAX_SLEEP_SLICE_MICROS = 0xffff;

    public StreamSelection {
        if (sleepSliceMicros < 0 || sleepSliceMicros > MAX_SLEEP_SLICE_MICROS) {
            throw new IllegalArgumentException("a sleep slice must be 0 to " + MAX_SLEEP_SLICE_MICROS + "us, got "
                    + sleepSliceMicros + "us");
        }
        if (waitTimeoutMillis < 0) {
            throw new IllegalArgumentException("a completion timeout cannot be negative, got " + waitTimeoutMillis + "ms");
        }
    }

    /** A configured sleep slice in whole microseconds, refused outside 0..{@value #MAX_SLEEP_SLICE_MICROS} us. */
    public static int sleepSliceMicros(java.time.Duration slice) {
        long micros = slice.toNanos() / 1000;
        if (slice.isNegative() || micros > MAX_SLEEP_SLICE_MICROS) {
            throw new IllegalArgumentException("a sleep slice must be 0 to " + MAX_SLEEP_SLICE_MICROS + "us, got " + slice);
        }
        return (int) micros;
    }

    /**
     * A configured completion timeout in whole milliseconds (0: none), refused when negative or
     * past {@link Integer#MAX_VALUE} ms; a fraction of a millisecond counts as a whole one.
     */
    public static int waitTimeoutMillis(java.time.Duration timeout) {
        if (timeout.isNegative() || timeout.compareTo(java.time.Duration.ofMillis(Integer.MAX_VALUE)) > 0) {
            throw new IllegalArgumentException("a completion timeout must be 0 to " + Integer.MAX_VALUE + "ms, got "
                    + timeout);
        }
        long millis = timeout.toMillis();
        return (int) (timeout.equals(java.time.Duration.ofMillis(millis)) ? millis : millis + 1);
    }

    /** Order matters: the ordinal travels to the bridge (ExecutionCall). */
    public enum Mode {
        /** No guard: each delegate picks its own stream. */
        NONE,
        /** Guard only, no CUDA calls: opaque handles on hosts without a GPU. */
        SELECT_ONLY,
        /** Make the device current, guard, run, then wait for the stream. */
        CUDA
    }

    /**
     * How the bridge waits for the GPU work of a {@link Mode#CUDA} call (native/src/completion_wait.h).
     * Order matters: the ordinal travels to the bridge (ExecutionCall).
     */
    public enum CompletionWait {
        /** Sleep for the time this instance's work is expected to take, then poll an event. */
        ADAPTIVE,
        /** cudaStreamSynchronize: lowest latency, a host core busy for the whole GPU time. */
        SPIN,
        /** A blocking-sync event: least CPU, tens to hundreds of microseconds of wake-up latency. */
        BLOCKING
    }

    private static final StreamSelection NONE = new StreamSelection(Mode.NONE, 0, 0, CompletionWait.ADAPTIVE, 0, 0);

    /** The device a call with this selection runs on (its stream's), or empty for a call without one. */
    public OptionalInt onDevice() {
        return mode != Mode.NONE ? OptionalInt.of(device) : OptionalInt.empty();
    }

    public static StreamSelection none() {
        return NONE;
    }

    public static StreamSelection selectOnly(long handle) {
        return new StreamSelection(Mode.SELECT_ONLY, handle, 0, CompletionWait.ADAPTIVE, 0, 0);
    }

    public static StreamSelection cuda(long handle, int device) {
        return cuda(handle, device, CompletionWait.ADAPTIVE);
    }

    public static StreamSelection cuda(long handle, int device, CompletionWait wait) {
        return cuda(handle, device, wait, 0);
    }

    /**
     * @param sleepSliceMicros the adaptive wait's longest single sleep (0: one sleep for the whole
     *     expected time); see {@code etserve.cuda.sleep-slice}
     */
    public static StreamSelection cuda(long handle, int device, CompletionWait wait, int sleepSliceMicros) {
        return cuda(handle, device, wait, sleepSliceMicros, 0);
    }

    /**
     * @param waitTimeoutMillis how long the adaptive wait waits for the call's GPU work before the
     *     call fails and the device is taken as hung (0: no limit); see {@code etserve.cuda.completion-timeout}
     */
    public static StreamSelection cuda(long handle, int device, CompletionWait wait, int sleepSliceMicros,
            int waitTimeoutMillis) {
        return new StreamSelection(Mode.CUDA, handle, device, wait, sleepSliceMicros, waitTimeoutMillis);
    }
}
