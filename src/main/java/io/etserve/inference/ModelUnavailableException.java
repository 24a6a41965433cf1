package io.etserve.inference;

import java.time.Duration;

/** The model exists but cannot serve now (failed load, missing delegate, open breaker): a 503. */
public final class ModelUnavailableException extends InferenceException {

    private final Duration retryAfter;
    private final String version;

    public ModelUnavailableException(String message) {
        this(message, null);
    }

    /** @param retryAfter when a retry may succeed (an open breaker's wait), or null when unknown */
    public ModelUnavailableException(String message, Duration retryAfter) {
        this(message, retryAfter, "");
    }

    /** @param version the version that is not ready (the one a request without a version resolved to) */
    public ModelUnavailableException(String message, Duration retryAfter, String version) {
        super(message);
        this.retryAfter = retryAfter;
        this.version = version;
    }

    @Override
    public Kind kind() {
        return Kind.UNAVAILABLE;
    }

    /** The version that cannot serve, where known; empty otherwise. */
    public String version() {
        return version;
    }

    /** Null when the condition has no known end (a model that failed to load). */
    @Override
    public Duration retryAfter() {
        return retryAfter;
    }
}
