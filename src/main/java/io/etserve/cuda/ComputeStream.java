package io.etserve.cuda;

/** A stream some device work can be queued on, identified by its raw handle. */
public interface ComputeStream {
    int device();

    /** The raw {@code cudaStream_t} value handed to ExecuTorch's caller-stream guard. */
    long handle();
}
