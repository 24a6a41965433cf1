package io.etserve.inference;

/** Hooks for metrics around each request (Triton's names: see io.etserve.metrics). */
public interface InferenceObserver {

    /** Failure reasons, as Triton labels them. */
    enum FailureReason {
        REJECTED, // queue full / timeout waiting for an instance
        BACKEND, // the runtime or a delegate failed
        OTHER // bad request, unknown model, not ready
    }

    void pending(String model, int delta);

    void success(String model, String version, long queueNanos, long inputNanos, long inferNanos, long outputNanos);

    void failure(String model, String version, FailureReason reason, long requestNanos);

    InferenceObserver NONE = new InferenceObserver() {
        @Override
        public void pending(String model, int delta) {}

        @Override
        public void success(String model, String version, long q, long i, long c, long o) {}

        @Override
        public void failure(String model, String version, FailureReason reason, long requestNanos) {}
    };
}
