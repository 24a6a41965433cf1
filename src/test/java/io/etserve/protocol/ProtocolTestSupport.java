package io.etserve.protocol;

import io.etserve.inference.DataType;
import io.etserve.inference.Tensor;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/** Builders for hand-made request bodies and expected tensor bytes. */
final class ProtocolTestSupport {

    static final DecodeLimits LIMITS = new DecodeLimits(1_000_000, 16);

    private ProtocolTestSupport() {}

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** A little-endian heap buffer to write expected values into. */
    static ByteBuffer le(int capacity) {
        return ByteBuffer.allocate(capacity).order(ByteOrder.LITTLE_ENDIAN);
    }

    static byte[] bytesOf(ByteBuffer buffer) {
        ByteBuffer b = buffer.duplicate();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            out.writeBytes(p);
        }
        return out.toByteArray();
    }

    /** A JSON header followed by binary chunks, as the binary tensor data extension sends it. */
    record BinaryBody(byte[] body, int headerLength) {
        static BinaryBody of(String json, byte[]... chunks) {
            byte[] header = utf8(json);
            byte[] body = concat(header, concat(chunks));
            return new BinaryBody(body, header.length);
        }
    }

    static Tensor tensor(String name, DataType type, long[] shape, byte[] bytes) {
        ByteBuffer data = ByteBuffer.allocateDirect(bytes.length).order(ByteOrder.LITTLE_ENDIAN);
        data.put(bytes).flip();
        return new Tensor(name, type, shape, data);
    }

    /** BYTES elements laid out as 4-byte little-endian length, then the bytes. */
    static byte[] lengthPrefixed(byte[]... elements) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] e : elements) {
            out.write(e.length & 0xFF);
            out.write((e.length >>> 8) & 0xFF);
            out.write((e.length >>> 16) & 0xFF);
            out.write((e.length >>> 24) & 0xFF);
            out.writeBytes(e);
        }
        return out.toByteArray();
    }
}
