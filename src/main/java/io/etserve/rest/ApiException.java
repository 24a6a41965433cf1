package io.etserve.rest;

import java.time.Duration;
import org.springframework.http.HttpStatus;

/** An error the protocol answers with {@code {"error": message}} and the given status. */
public class ApiException extends RuntimeException {

    private final HttpStatus status;
    private final Duration retryAfter;

    public ApiException(HttpStatus status, String message) {
        this(status, message, null);
    }

    public ApiException(HttpStatus status, String message, Duration retryAfter) {
        super(message);
        this.status = status;
        this.retryAfter = retryAfter;
    }

    public HttpStatus status() {
        return status;
    }

    /** For 503s: when a retry has a chance. */
    public Duration retryAfter() {
        return retryAfter;
    }

    /**
     * The {@code Retry-After} value: whole seconds, rounded up and at least 1 (a client told "0"
     * would retry at once), or null when there is none.
     */
    public String retryAfterHeader() {
        return retryAfter == null ? null : Long.toString(Math.max(1, (retryAfter.toMillis() + 999) / 1000));
    }
}
