package io.etserve.cuda;

import java.nio.ByteBuffer;

/**
 * Device memory another process allocated and exported (a CUDA IPC handle), opened in this one:
 * Triton's CUDA shared memory. The bytes stay on the device; a request's inputs are copied out of
 * it and its outputs into it. Closed once, when nothing uses it any more.
 */
public interface ImportedDeviceMemory extends AutoCloseable {

    /** Bytes of CUDA's IPC handle ({@code CUDA_IPC_HANDLE_SIZE}). */
    int HANDLE_BYTES = 64;

    /** The device it is on. */
    int device();

    /** Bytes of the allocation the handle opened: a region of it may not reach further. */
    long allocationBytes();

    /** Fills {@code into} (a direct buffer; its remaining bytes) from {@code offset} bytes into the allocation. */
    void copyToHost(long offset, ByteBuffer into);

    /** Writes {@code from}'s remaining bytes (a direct buffer) at {@code offset} bytes into the allocation. */
    void copyFromHost(ByteBuffer from, long offset);

    @Override
    void close();

    /** Opens handles; {@link CudaIpc} on a host with CUDA. */
    @FunctionalInterface
    interface Opener extends AutoCloseable {

        /**
         * Opens the {@link #HANDLE_BYTES}-byte {@code handle} on {@code device}.
         *
         * @throws IllegalArgumentException for a handle this host cannot open (the client's error)
         */
        ImportedDeviceMemory open(byte[] handle, int device);

        /** Releases what the opened memory shares (none unless overridden), after the last region is closed. */
        @Override
        default void close() {}
    }
}
