package io.etserve.sharedmemory;

import io.etserve.inference.UntrustedText;

/**
 * Triton's CUDA shared-memory extension, which this service does not serve: no region can be
 * registered, so the status lists none and an unregister has nothing to do. Both protocols answer
 * so, as Triton does with no region registered; Triton's tools (perf_analyzer) unregister every
 * region of both kinds when they finish, and must find that call answered.
 */
public final class CudaSharedMemory {

    /** The refusal of a registration (REST 501, gRPC UNIMPLEMENTED). */
    public static final String NOT_SERVED = "CUDA shared memory is not served: pass the tensors in the request"
            + " (the binary tensor extension) or through system shared memory.";

    private CudaSharedMemory() {}

    /** The status of one region (REST 404, gRPC NOT_FOUND): none is ever registered. */
    public static String unknownRegion(String name) {
        return "Unable to find cuda shared memory region: '" + UntrustedText.abbreviate(name) + "'";
    }
}
