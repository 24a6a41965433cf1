package io.etserve.execution;

import io.etserve.inference.InferenceException;
import io.etserve.inference.RequestCancelledException;
import io.etserve.runtime.CompletionWaits;

/** Hooks for metrics around each request (Triton's names: see io.etserve.metrics). */
public interface InferenceObserver {

    /** Failure reasons, as Triton labels them. */
    enum FailureReason {
        REJECTED, // queue full / timeout waiting for an instance
        BACKEND, // the runtime or a delegate failed
        CANCELED, // nobody waited for it any more (Triton's spelling): its caller went, or its deadline passed
        OTHER; // bad request, unknown model, not ready

        /** Each kind of failure under Triton's label: a request whose timeout expired in the queue counts as rejected. */
        public static FailureReason of(InferenceException.Kind kind) {
            return switch (kind) {
                case OVERLOADED, TIMED_OUT -> REJECTED;
                case FAILED -> BACKEND;
                case CLIENT_GONE, DEADLINE_EXCEEDED -> CANCELED;
                case INVALID_INPUT, NOT_FOUND, UNAVAILABLE -> OTHER;
            };
        }
    }

    /** A model version loaded: its series exist (at 0) from now on, as Triton exports them. */
    default void loaded(String model, String version) {}

    /** A model version unloaded: its series go away. */
    default void unloaded(String model, String version) {}

    /**
     * A row of the repository index after a load: whether the version's last load failed (it
     * serves nothing, or serves what it loaded before). {@code version} is empty for a model
     * without a usable version (its config.yml does not read, no version directory).
     */
    default void indexed(String model, String version, boolean loadFailed) {}

    /** The row left the repository index. */
    default void unindexed(String model, String version) {}

    void pending(String model, String version, int delta);

    /**
     * A request succeeded.
     *
     * @param inferences what it counts as in {@code nv_inference_count}: its rows when the model
     *     batches, else 1
     */
    void success(String model, String version, long inferences, long queueNanos, long inputNanos, long inferNanos,
            long outputNanos);

    /**
     * A forward call ran (once however many requests shared it), and where its time went
     * (Triton's batch statistics, whose batch size is 1 for a model that runs each request alone).
     *
     * @param batchRows the rows a batched model joined into it, 0 when the model does not batch
     */
    default void executed(String model, String version, int batchRows, long inputNanos, long inferNanos,
            long outputNanos) {}

    /** A GPU forward call's adaptive completion wait ended so (native/src/completion_wait.h). */
    default void completionWait(String model, String version, CompletionWaits.Ended ended) {}

    void failure(String model, String version, FailureReason reason, long requestNanos);

    /**
     * A request was dropped because nobody waited for it (before {@link #failure}): before it ran
     * (stage queue or batch), or with its outputs discarded (stage execution).
     */
    default void cancelled(String model, String version, RequestCancelledException.Stage stage,
            RequestCancelledException.Reason reason) {}

    InferenceObserver NONE = new InferenceObserver() {
        @Override
        public void pending(String model, String version, int delta) {}

        @Override
        public void success(String model, String version, long n, long q, long i, long c, long o) {}

        @Override
        public void failure(String model, String version, FailureReason reason, long requestNanos) {}
    };
}
