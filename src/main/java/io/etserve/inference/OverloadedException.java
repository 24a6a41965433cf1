package io.etserve.inference;

import java.time.Duration;

/** Every instance of the model stayed busy for the whole wait: answer 503 with Retry-After. */
public final class OverloadedException extends InferenceException {
    private final Duration retryAfter;

    public OverloadedException(String message, Duration retryAfter) {
        super(message);
        this.retryAfter = retryAfter;
    }

    @Override
    public Kind kind() {
        return Kind.OVERLOADED;
    }

    @Override
    public Duration retryAfter() {
        return retryAfter;
    }
}
