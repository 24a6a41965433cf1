package io.etserve.inference;

import java.time.Duration;

/** Every instance of the model stayed busy for the whole wait: answer 503 with Retry-After. */
public class OverloadedException extends RuntimeException {
    private final Duration retryAfter;

    public OverloadedException(String message, Duration retryAfter) {
        super(message);
        this.retryAfter = retryAfter;
    }

    public Duration retryAfter() {
        return retryAfter;
    }
}
