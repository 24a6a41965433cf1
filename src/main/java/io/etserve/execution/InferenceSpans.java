package io.etserve.execution;

import java.util.List;

/**
 * Trace spans of a request's way through the service, beside {@link InferenceObserver}'s
 * metrics: the wait for an instance or a batch, the forward call, the encoding of the answer
 * (io.etserve.tracing, docs/tracing.md). Each is a child of the calling thread's current span,
 * the request's; without one (tracing off, a call from inside the service) nothing is made.
 * {@link #OFF} creates nothing at all.
 */
public interface InferenceSpans {

    /** A span of one phase of a request, in progress; {@link #close} ends it (once). */
    interface Phase extends AutoCloseable {

        /** Records the failure it ends with. */
        default void failed(Throwable error) {}

        /** A request that waited in a dynamic batch: the batch it joined and its forward call's span. */
        default void joined(BatchJoined batch) {}

        /** Its trace context, which a batch's forward span links to; null when nothing is traced. */
        default Object context() {
            return null;
        }

        /** Ends it at {@code nanoTime} (a {@link System#nanoTime} reading) instead of now. */
        default void endAt(long nanoTime) {}

        @Override
        default void close() {}
    }

    /**
     * The batch a request ran in.
     *
     * @param forward the trace context of the batch's forward span
     * @param requests requests in the batch
     * @param rows rows of the batch
     */
    record BatchJoined(Object forward, int requests, int rows) {}

    /** A span that is not recorded. */
    Phase NONE = new Phase() {};

    /** Names the request's own span after the model version that takes it. */
    void resolved(String model, String version);

    /** Waiting for a free instance, or in a dynamic batcher for a batch and its instance. */
    Phase queue(String model, String version);

    /**
     * One forward call on {@code slot}.
     *
     * @param requests requests sharing it (1 unless batched)
     * @param rows rows joined into it, 0 when the model does not batch
     * @param links trace contexts of the batched requests' queue spans (empty unless batched)
     */
    Phase forward(String model, String version, ExecutionSlot slot, int requests, int rows, List<Object> links);

    /** Encoding the answer of {@code protocol} (rest, grpc). */
    Phase encode(String model, String protocol);

    /**
     * {@code task}, to run later on another thread inside the span current here (the request's),
     * so what it records stays in the request's trace; {@code task} itself when none is current.
     */
    default Runnable carry(Runnable task) {
        return task;
    }

    /** Tracing off: no span, no allocation. */
    InferenceSpans OFF = new InferenceSpans() {
        @Override
        public void resolved(String model, String version) {}

        @Override
        public Phase queue(String model, String version) {
            return NONE;
        }

        @Override
        public Phase forward(String model, String version, ExecutionSlot slot, int requests, int rows,
                List<Object> links) {
            return NONE;
        }

        @Override
        public Phase encode(String model, String protocol) {
            return NONE;
        }
    };
}
