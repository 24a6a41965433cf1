package io.etserve.rest;

import io.etserve.protocol.ErrorBody;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;

/**
 * A refusal of the REST layer itself (a body over the size limit, one that did not arrive in
 * time, a full in-flight budget, a server that is not ready): answered with
 * {@code {"error": message}} and its status, by {@link ApiExceptionHandler} inside Spring MVC
 * or by {@link #writeTo} from a filter outside it.
 */
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
     * A {@code Retry-After} value: whole seconds, rounded up and at least 1 (a client told "0"
     * would retry at once).
     */
    static String retryAfterHeader(Duration retryAfter) {
        return Long.toString(Math.max(1, (retryAfter.toMillis() + 999) / 1000));
    }

    /** The status's reason phrase, the message of an error that has none of its own. */
    static String reasonPhrase(int status) {
        HttpStatus known = HttpStatus.resolve(status);
        return known != null ? known.getReasonPhrase() : "HTTP " + status;
    }

    /**
     * This answer written straight to a servlet response (outside Spring MVC).
     *
     * @param closeConnection add {@code Connection: close}: the rest of the body was not read,
     *     so the connection cannot carry another request
     */
    void writeTo(HttpServletResponse response, boolean closeConnection) throws IOException {
        write(response, status.value(), getMessage(), retryAfter, closeConnection);
    }

    /**
     * An error answer in the protocol's body, written straight to a servlet response: this
     * class's own refusals, and {@link ApiExceptionHandler}'s answers on the direct inference path.
     */
    static void write(HttpServletResponse response, int status, String message, Duration retryAfter,
            boolean closeConnection) throws IOException {
        byte[] json = ErrorBody.error(message);
        response.setStatus(status);
        response.setContentType(MediaType.APPLICATION_JSON_VALUE);
        if (retryAfter != null) {
            response.setHeader(HttpHeaders.RETRY_AFTER, retryAfterHeader(retryAfter));
        }
        if (closeConnection) {
            response.setHeader(HttpHeaders.CONNECTION, "close");
        }
        response.setContentLength(json.length);
        response.getOutputStream().write(json);
    }
}
