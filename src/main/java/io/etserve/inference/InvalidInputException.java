package io.etserve.inference;

/**
 * The request is wrong: it breaks the protocol or a limit, or does not fit the model (names,
 * dtypes, shapes, sizes). A 400. Open to subclasses for the layers above that refuse requests
 * of their own (the protocol's decoders, the repository extension).
 */
public non-sealed class InvalidInputException extends InferenceException {

    public InvalidInputException(String message) {
        super(message);
    }

    public InvalidInputException(String message, Throwable cause) {
        super(message, cause);
    }

    @Override
    public final Kind kind() {
        return Kind.INVALID_INPUT;
    }
}
