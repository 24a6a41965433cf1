package io.etserve.inference;

/** No such model or version: a 404. */
public class ModelNotFoundException extends RuntimeException {
    public ModelNotFoundException(String message) {
        super(message);
    }
}
