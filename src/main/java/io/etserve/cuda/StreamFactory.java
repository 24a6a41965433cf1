package io.etserve.cuda;

import io.etserve.runtime.StreamSelection;
import java.util.List;

/**
 * Creates, waits for and destroys streams. One production implementation,
 * {@link CudaStreamFactory} on JavaCPP's CUDA runtime; tests on hosts without a GPU use
 * opaque handles (as ExecuTorch's own tests do), never a fake CUDA library.
 */
public interface StreamFactory {

    /** Devices this factory can create streams on (ordinals). */
    List<Integer> devices();

    ComputeStream create(int device, int priority);

    /** Blocks until every piece of work queued on the stream has completed. */
    void synchronize(ComputeStream stream);

    void destroy(ComputeStream stream);

    /** How the bridge must treat these handles. */
    StreamSelection.Mode selectionMode();

    /** How the bridge waits for work on these streams (CUDA handles only). */
    default StreamSelection.CompletionWait completionWait() {
        return StreamSelection.CompletionWait.ADAPTIVE;
    }

    /** The adaptive wait's longest single sleep in microseconds (0: one sleep). */
    default int sleepSliceMicros() {
        return 0;
    }

    /** How long the adaptive wait waits for a call's GPU work, in milliseconds (0: no limit). */
    default int waitTimeoutMillis() {
        return 0;
    }
}
