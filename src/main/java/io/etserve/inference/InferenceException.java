package io.etserve.inference;

import io.etserve.runtime.ExecuTorchException;
import io.etserve.runtime.ProgramInstance;
import java.time.Duration;

/**
 * Every way an inference request can fail, as one sealed family: each subtype says its
 * {@link Kind}, and the protocols (REST status, gRPC status), the metrics' failure reasons,
 * the circuit breaker and the fault listener each read that kind in one {@code switch} instead
 * of classifying exception classes themselves. {@link #of} turns any other failure (one the
 * runtime or a bug threw) into its member of the family.
 */
public abstract sealed class InferenceException extends RuntimeException
        permits InvalidInputException, ModelNotFoundException, ModelUnavailableException, OverloadedException,
        RequestCancelledException, InferenceFailedException {

    /** What went wrong, as far as an answer, a metric or the breaker care. */
    public enum Kind {
        /** The request is wrong (protocol, names, dtypes, shapes): the caller's mistake. */
        INVALID_INPUT,
        /** No such model or version. */
        NOT_FOUND,
        /** The model exists but cannot serve now (failed load, unloading, breaker open). */
        UNAVAILABLE,
        /** No capacity within the wait: retry later. */
        OVERLOADED,
        /** The request's own {@code timeout} parameter passed before it ran (Triton counts it rejected). */
        TIMED_OUT,
        /** The caller's deadline passed before it was answered. */
        DEADLINE_EXCEEDED,
        /** The caller went away before it was answered. */
        CLIENT_GONE,
        /** The runtime, the device or the server failed: the only kind that counts against the model. */
        FAILED
    }

    InferenceException(String message) {
        super(message);
    }

    InferenceException(String message, Throwable cause) {
        super(message, cause);
    }

    /** For dropped requests: routine under overload, so no stack trace to fill. */
    InferenceException(String message, boolean stackTrace) {
        super(message, null, false, stackTrace);
    }

    public abstract Kind kind();

    /** When a retry may succeed (Retry-After, gRPC RetryInfo); null when unknown or pointless. */
    public Duration retryAfter() {
        return null;
    }

    /** {@code failure} as its member of the family, for a request whose model is unknown. */
    public static InferenceException of(Throwable failure) {
        return of(failure, null);
    }

    /** As {@link #of(Throwable, String, boolean)}, for a model whose inputs are all static. */
    public static InferenceException of(Throwable failure, String model) {
        return of(failure, model, false);
    }

    /**
     * {@code failure} as its member of the family: itself when it is one; ExecuTorch's verdict
     * on a bad argument is the caller's mistake, and so is a delegate's failure to carry dynamic
     * input dimensions through its graph (the dimensions given do not fit the program; for static
     * inputs the shapes were checked before the call, so there it is the program's fault); an
     * instance freed under a call means the model is unloading; anything else failed the request.
     *
     * @param model the model the request ran on, named in the message; null when unknown
     * @param dynamicInputs whether some input of the model has a dynamic dimension
     */
    public static InferenceException of(Throwable failure, String model, boolean dynamicInputs) {
        String subject = model == null ? "the model" : "model '" + model + "'";
        if (failure instanceof InferenceException known) {
            return known;
        }
        if (failure instanceof ExecuTorchException e && e.isInvalidInput()) {
            return new InvalidInputException(subject + " rejected the input: " + e.getMessage(), e);
        }
        if (dynamicInputs && failure instanceof ExecuTorchException e && e.isShapePropagationFailure()) {
            return new InvalidInputException(subject + " rejected the input: its dimensions do not fit the program"
                    + " (a delegate could not propagate them): " + e.getMessage(), e);
        }
        if (failure instanceof ProgramInstance.InstanceClosedException) {
            return new ModelUnavailableException(subject + " is unloading", Duration.ofSeconds(1));
        }
        return new InferenceFailedException(failure);
    }
}
