package io.etserve.runtime;

import java.nio.ByteBuffer;

/**
 * One input of a forward call: a direct buffer the bridge reads in place. The bridge reads the
 * components by name (native/src/jni_bridge.cpp, {@code JavaTypes}).
 */
public record ExecutionInput(ByteBuffer data, int scalarType, long[] shape) {
    public ExecutionInput {
        if (!data.isDirect()) {
            throw new IllegalArgumentException("inputs must be direct buffers");
        }
        // The bridge reads from the buffer's start: hand it exactly the readable window.
        data = data.slice();
        shape = shape.clone();
    }
}
