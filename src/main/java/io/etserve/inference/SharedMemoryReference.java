package io.etserve.inference;

/**
 * Where a tensor's bytes are in a registered system shared-memory region (Triton's extension):
 * an input read from there, or an output written there instead of into the answer.
 *
 * @param region the name the region was registered under
 * @param offset bytes from the start of the registered region (itself at an offset in its object)
 * @param byteSize the input's bytes, or the room given for an output
 */
public record SharedMemoryReference(String region, long offset, long byteSize) {

    public SharedMemoryReference {
        if (region == null || region.isEmpty()) {
            throw new IllegalArgumentException("a shared memory reference needs a region");
        }
        if (offset < 0 || byteSize < 0) {
            throw new IllegalArgumentException("offset and byte size must be >= 0, were " + offset + ", " + byteSize);
        }
    }
}
