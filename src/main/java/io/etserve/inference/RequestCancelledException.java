package io.etserve.inference;

import java.util.Locale;

/**
 * A request dropped because nobody waits for its answer any more: its caller went away, or its
 * deadline or its {@code timeout} parameter passed before it ran. A request dropped before its
 * forward call never runs it; one whose caller went during the call has its outputs discarded.
 */
public final class RequestCancelledException extends InferenceException {

    /** Why it was dropped. */
    public enum Reason {
        /** The caller went away: an HTTP client closed its connection, a gRPC call was cancelled. */
        CLIENT,
        /** The caller's own deadline passed (gRPC). */
        DEADLINE,
        /** The request's {@code timeout} parameter passed before it ran (Triton's "Request timeout expired"). */
        TIMEOUT;

        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** Where the request was when it was dropped. */
    public enum Stage {
        /** Waiting for a free instance (a model without dynamic batching). */
        QUEUE,
        /** Queued for a batch, or taken into one that had not run yet. */
        BATCH,
        /** Its forward call was running: the call finished and its outputs were discarded. */
        EXECUTION;

        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private final Reason reason;
    private final Stage stage;

    public RequestCancelledException(Reason reason, Stage stage, String message) {
        // Dropping is routine under overload: no stack trace to fill.
        super(message, false);
        this.reason = reason;
        this.stage = stage;
    }

    /** By why it was dropped: each reason answers differently (503, 504, 499) and counts differently. */
    @Override
    public Kind kind() {
        return switch (reason) {
            case CLIENT -> Kind.CLIENT_GONE;
            case DEADLINE -> Kind.DEADLINE_EXCEEDED;
            case TIMEOUT -> Kind.TIMED_OUT;
        };
    }

    public Reason reason() {
        return reason;
    }

    public Stage stage() {
        return stage;
    }
}
