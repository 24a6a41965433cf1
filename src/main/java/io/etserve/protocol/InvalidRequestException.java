package io.etserve.protocol;

import io.etserve.inference.InvalidInputException;

/**
 * A request body that breaks the Open Inference Protocol or this server's limits: the
 * invalid-input kind (REST 400, gRPC INVALID_ARGUMENT) with the message in the error body. The
 * message is one sentence that names the offending input where there is one.
 */
public class InvalidRequestException extends InvalidInputException {

    public InvalidRequestException(String message) {
        super(message);
    }

    public InvalidRequestException(String message, Throwable cause) {
        super(message, cause);
    }
}
