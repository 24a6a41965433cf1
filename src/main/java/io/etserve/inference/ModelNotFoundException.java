package io.etserve.inference;

/** No such model or version: a 404. */
public final class ModelNotFoundException extends InferenceException {
    public ModelNotFoundException(String message) {
        super(message);
    }

    @Override
    public Kind kind() {
        return Kind.NOT_FOUND;
    }
}
