package io.etserve.support;

import io.etserve.inference.DataType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A model's reference.json: fixed inputs and the outputs PyTorch computed for them at export
 * time (scripts/export), with the tolerance the export verified.
 */
public record Reference(double atol, double rtol, List<Case> cases) {

    public record TensorValue(String name, String datatype, long[] shape, List<Double> data, JsonNode json) {
        /**
         * False for an output whose values PyTorch cannot know (e.g. the CUDA stream a probe
         * partition observed): its name, datatype and shape are still checked, its values not.
         */
        public boolean compared() {
            return json.path("compare").asBoolean(true);
        }

        /** The values as little-endian bytes of the datatype (BOOL as 0/1). */
        public ByteBuffer bytes() {
            DataType t = DataType.fromProtocol(datatype).orElseThrow();
            ByteBuffer b = ByteBuffer.allocate(data.size() * t.byteSize()).order(ByteOrder.LITTLE_ENDIAN);
            for (double v : data) {
                switch (t) {
                    case BOOL, UINT8, INT8 -> b.put((byte) v);
                    case INT16, UINT16 -> b.putShort((short) v);
                    case INT32, UINT32 -> b.putInt((int) v);
                    case INT64, UINT64 -> b.putLong((long) v);
                    case FP32 -> b.putFloat((float) v);
                    case FP64 -> b.putDouble(v);
                    case FP16 -> b.putShort(toHalf((float) v));
                    case BF16 -> b.putShort((short) (Float.floatToRawIntBits((float) v) >>> 16));
                    default -> throw new IllegalArgumentException(datatype);
                }
            }
            return b.flip();
        }
    }

    /** IEEE 754 binary16 bits of {@code f}, round-to-nearest-even (Float.floatToFloat16 is Java 20+). */
    static short toHalf(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int exp = ((bits >>> 23) & 0xFF) - 127 + 15;
        int mant = bits & 0x7FFFFF;
        if (((bits >>> 23) & 0xFF) == 0xFF) {
            return (short) (sign | 0x7C00 | (mant != 0 ? 0x200 : 0));
        }
        if (exp >= 0x1F) {
            return (short) (sign | 0x7C00);
        }
        if (exp <= 0) {
            if (exp < -10) {
                return (short) sign;
            }
            mant |= 0x800000;
            int shift = 14 - exp;
            int half = mant >> shift;
            int rem = mant & ((1 << shift) - 1);
            int mid = 1 << (shift - 1);
            if (rem > mid || (rem == mid && (half & 1) != 0)) {
                half++;
            }
            return (short) (sign | half);
        }
        int half = (exp << 10) | (mant >> 13);
        int rem = mant & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (half & 1) != 0)) {
            half++;
        }
        return (short) (sign | half);
    }

    public record Case(List<TensorValue> inputs, List<TensorValue> outputs) {}

    private static final JsonMapper JSON = JsonMapper.builder().build();

    public static Reference load(Path file) {
        JsonNode root;
        try {
            root = JSON.readTree(file.toFile());
        } catch (RuntimeException e) {
            throw new IllegalStateException("cannot read " + file, e);
        }
        JsonNode tol = root.path("tolerance");
        List<Case> cases = new ArrayList<>();
        for (JsonNode c : root.path("cases")) {
            cases.add(new Case(tensors(c.path("inputs")), tensors(c.path("outputs"))));
        }
        return new Reference(tol.path("atol").asDouble(0), tol.path("rtol").asDouble(0), cases);
    }

    private static List<TensorValue> tensors(JsonNode arr) {
        List<TensorValue> out = new ArrayList<>();
        for (JsonNode t : arr) {
            long[] shape = new long[t.path("shape").size()];
            for (int i = 0; i < shape.length; i++) {
                shape[i] = t.path("shape").get(i).asLong();
            }
            List<Double> data = new ArrayList<>();
            for (JsonNode v : t.path("data")) {
                data.add(v.isBoolean() ? (v.asBoolean() ? 1.0 : 0.0) : v.asDouble());
            }
            out.add(new TensorValue(t.path("name").asString(), t.path("datatype").asString(), shape, data, t));
        }
        return out;
    }

    /** |actual - expected| <= atol + rtol * |expected|, elementwise. */
    public boolean close(double actual, double expected) {
        return Math.abs(actual - expected) <= atol + rtol * Math.abs(expected);
    }
}
