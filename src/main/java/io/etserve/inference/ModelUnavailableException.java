package io.etserve.inference;

import java.time.Duration;

/** The model exists but cannot serve now (failed load, missing delegate, open breaker): a 503. */
public class ModelUnavailableException extends RuntimeException {

    private final Duration retryAfter;

    public ModelUnavailableException(String message) {
        this(message, null);
    }

    /** @param retryAfter when a retry may succeed (an open breaker's wait), or null when unknown */
    public ModelUnavailableException(String message, Duration retryAfter) {
        super(message);
        this.retryAfter = retryAfter;
    }

    /** For Retry-After; null when the condition has no known end (a model that failed to load). */
    public Duration retryAfter() {
        return retryAfter;
    }
}
