package io.etserve.runtime;

import java.nio.ByteBuffer;

/**
 * One output of a forward call, copied out of the Module's memory by the bridge into a direct
 * buffer from the call's {@link OutputBuffers} (position 0, limit = the output's bytes). The
 * bridge builds it with the canonical constructor (native/src/jni_bridge.cpp, {@code JavaTypes}).
 */
public record ExecutionOutput(int scalarType, long[] shape, ByteBuffer data) {

    /** The bytes as a new array (tests and tools; the serving path writes {@link #data()} as is). */
    public byte[] toArray() {
        byte[] copy = new byte[data.remaining()];
        data.duplicate().get(copy);
        return copy;
    }
}
