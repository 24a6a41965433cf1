package io.etserve.protocol;

/**
 * A request body that breaks the Open Inference Protocol or this server's limits; the web
 * layer answers it with 400 and the message in an {@code {"error": ...}} body. The message
 * is one sentence that names the offending input where there is one.
 */
public class InvalidRequestException extends RuntimeException {

    public InvalidRequestException(String message) {
        super(message);
    }

    public InvalidRequestException(String message, Throwable cause) {
        super(message, cause);
    }
}
