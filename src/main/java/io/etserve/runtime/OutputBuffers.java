package io.etserve.runtime;

import java.nio.ByteBuffer;

/**
 * Where a forward call's outputs are copied: the bridge asks for one direct buffer per output,
 * of exactly the output's size, and copies the Module's memory into it (the only copy out).
 */
@FunctionalInterface
public interface OutputBuffers {

    /** Fresh direct buffers, each the caller's to keep. */
    OutputBuffers ALLOCATE = (output, bytes) ->
            ByteBuffer.allocateDirect(Math.toIntExact(bytes)).order(java.nio.ByteOrder.LITTLE_ENDIAN);

    /** A direct buffer with at least {@code bytes} remaining from position 0, for output {@code output}. */
    ByteBuffer allocate(int output, long bytes);
}
