package io.etserve.api;

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
}
