package io.etserve.modelconfig;


/**
 * {@code warmup:} in config.yml: runs a few calls on every instance (on every device it is
 * placed on) before the model reports ready, so the first request does not pay for lazy
 * initialisation (XNNPACK's workspaces, GPU contexts and kernels). Zeros and random inputs take
 * each dimension at its upper bound; a file gives representative inputs (shapes a delegate
 * should see first, real values). {@code io.etserve.repository.WarmupCalls} runs them.
 */
public record Warmup(int samples, Data data, String file) {

    public enum Data {
        ZEROS,
        RANDOM,
        /** Representative inputs from a file in the version directory (the protocol's JSON request). */
        FILE
    }

    public static final Warmup NONE = new Warmup(0, Data.ZEROS);

    public Warmup(int samples, Data data) {
        this(samples, data, null);
    }
}
