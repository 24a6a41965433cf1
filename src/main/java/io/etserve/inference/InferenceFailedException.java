package io.etserve.inference;

import io.etserve.cuda.CudaException;
import io.etserve.runtime.ExecuTorchException;
import org.slf4j.Logger;

/**
 * The runtime, the device or the server itself failed a request: a 500, counted against the
 * model's breaker and shown to the fault listener. The cause is what failed; the message is what
 * a client may read: ExecuTorch's own report (error name, native log), the CUDA runtime's (the
 * call, CUDA's error name and description: a copy in or out of CUDA shared memory) or, for
 * anything else, only the failure's class, whose details stay in the log.
 */
public final class InferenceFailedException extends InferenceException {

    public InferenceFailedException(Throwable cause) {
        super(reported(cause) ? "inference failed: " + cause.getMessage()
                : "internal error: " + cause.getClass().getSimpleName(), cause);
    }

    /** A failure the runtime or the device reported, in words a client may read. */
    private static boolean reported(Throwable cause) {
        return cause instanceof ExecuTorchException || cause instanceof CudaException;
    }

    @Override
    public Kind kind() {
        return Kind.FAILED;
    }

    /** Not a failure the runtime reported, but one nobody foresaw (a bug). */
    public boolean unexpected() {
        return !reported(getCause());
    }

    /** As the protocols log it when they answer: the runtime's report as a warning, a bug with its stack. */
    public void log(Logger log) {
        if (unexpected()) {
            log.error("unexpected failure", getCause());
        } else {
            log.warn("inference failed in the runtime: {}", getCause().getMessage());
        }
    }
}
