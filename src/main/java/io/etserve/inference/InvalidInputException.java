package io.etserve.inference;

/** The request does not fit the model (names, dtypes, shapes, sizes): a 400. */
public class InvalidInputException extends RuntimeException {
    public InvalidInputException(String message) {
        super(message);
    }
}
