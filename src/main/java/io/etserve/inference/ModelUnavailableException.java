package io.etserve.inference;

/** The model exists but cannot serve now (failed load, missing delegate, open breaker): a 503. */
public class ModelUnavailableException extends RuntimeException {
    public ModelUnavailableException(String message) {
        super(message);
    }
}
