package io.etserve.inference;

/**
 * A request of a caller that may not wait ({@link Caller#mayWait}) found no instance free: nothing
 * ran and nothing failed. Its transport hands the request to a thread that may wait and runs it
 * again there. Not an {@link InferenceException}: no client ever sees it.
 */
public final class WouldWaitException extends RuntimeException {

    public WouldWaitException(String modelName) {
        super("no instance of model '" + modelName + "' is free now", null, false, false);
    }
}
