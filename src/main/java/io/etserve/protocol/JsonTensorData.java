package io.etserve.protocol;

import io.etserve.inference.DataType;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.function.IntFunction;
import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;

/**
 * An input's JSON {@code data}, parsed straight into its buffer (one pass, no boxed values).
 * BYTES elements are stored as Triton lays them out: a 4-byte little-endian length, then the
 * bytes. FP32/FP64 also accept the strings {@code "NaN"}, {@code "Infinity"} and
 * {@code "-Infinity"}, which is how {@link InferResponseEncoder} writes those values.
 */
final class JsonTensorData {

    private static final BigInteger UINT64_MAX = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);
    private static final long MAX_TENSOR_BYTES = TensorChecks.MAX_TENSOR_BYTES;

    private JsonTensorData() {}

    /**
     * Reads the {@code data} array at the parser (flat or nested row-major) into a buffer from
     * {@code buffers}: exactly {@code count} elements, each checked against the type's range.
     */
    static ByteBuffer read(JsonParser p, String label, DataType type, long[] shape, long count,
        IntFunction<ByteBuffer> buffers) {
        if (!type.jsonRepresentable()) {
            throw new InvalidRequestException(label + " has datatype " + type.protocolName()
                    + ", which can only be sent as binary data (binary_data_size).");
        }
        if (p.currentToken() != JsonToken.START_ARRAY) {
            throw new InvalidRequestException(label + " 'data' must be an array.");
        }
        DataSink sink = type.kind() == DataType.Kind.BYTES
                ? new BytesSink()
                : new FixedSink(buffers.apply(TensorChecks.byteSize(label, type, count))
                        .order(ByteOrder.LITTLE_ENDIAN), type);
        long read = 0;
        int depth = 1;
        while (depth > 0) {
            JsonToken t = p.nextToken();
            if (t == null) {
                throw new InvalidRequestException(label + " 'data' ends before its closing bracket.");
            }
            if (t == JsonToken.START_ARRAY) {
                if (++depth > InferRequestDecoder.MAX_DATA_NESTING) {
                    throw new InvalidRequestException(label + " 'data' nests arrays deeper than "
                            + InferRequestDecoder.MAX_DATA_NESTING + " levels.");
                }
            } else if (t == JsonToken.END_ARRAY) {
                depth--;
            } else {
                if (read == count) {
                    throw new InvalidRequestException(label + " has more data elements than its shape "
                            + Arrays.toString(shape) + " holds (" + count + ").");
                }
                sink.accept(p, t, label, read);
                read++;
            }
        }
        TensorChecks.requireValueCount(label, read, "data elements", shape, count);
        return sink.finish();
    }

    private interface DataSink {
        void accept(JsonParser p, JsonToken t, String label, long index);

        ByteBuffer finish();
    }

    /** Fixed-size elements, written straight into the tensor's direct buffer. */
    private static final class FixedSink implements DataSink {
        private final ByteBuffer buffer;
        private final DataType type;

        FixedSink(ByteBuffer buffer, DataType type) {
            this.buffer = buffer;
            this.type = type;
        }

        @Override
        public void accept(JsonParser p, JsonToken t, String label, long index) {
            long bits = switch (type.kind()) {
                case BOOL -> bool(p, t, label, index);
                case SIGNED, UNSIGNED -> integer(p, t, label, index);
                case FLOAT -> type.byteSize() == Float.BYTES
                        ? Float.floatToRawIntBits(fp32(p, t, label, index))
                        : Double.doubleToRawLongBits(fp64(p, t, label, index));
                case BYTES -> throw new IllegalStateException("BYTES has no fixed-size elements");
            };
            type.putBits(buffer, bits);
        }

        @Override
        public ByteBuffer finish() {
            return buffer.flip();
        }

        private byte bool(JsonParser p, JsonToken t, String label, long index) {
            if (t == JsonToken.VALUE_TRUE) {
                return 1;
            }
            if (t == JsonToken.VALUE_FALSE) {
                return 0;
            }
            throw wrongKind(p, t, label, index, "true or false");
        }

        /** The value, range-checked; a UINT64 past {@link Long#MAX_VALUE} comes back as its raw bits. */
        private long integer(JsonParser p, JsonToken t, String label, long index) {
            if (t != JsonToken.VALUE_NUMBER_INT) {
                throw wrongKind(p, t, label, index, "integers");
            }
            if (p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
                long value = p.getLongValue();
                if (type.holds(value)) {
                    return value;
                }
            } else if (type.kind() == DataType.Kind.UNSIGNED && type.byteSize() == Long.BYTES) {
                BigInteger value = p.getBigIntegerValue();
                if (value.signum() >= 0 && value.compareTo(UINT64_MAX) <= 0) {
                    return value.longValue();
                }
            }
            throw outOfRange(p, label, index);
        }

        private float fp32(JsonParser p, JsonToken t, String label, long index) {
            if (t == JsonToken.VALUE_NUMBER_FLOAT || t == JsonToken.VALUE_NUMBER_INT) {
                // Straight to the nearest float, no double rounding: DecimalText where it can
                // tell without allocating, else Jackson.
                float value = DecimalText.parseFloat(p.getStringCharacters(), p.getStringOffset(), p.getStringLength());
                if (Float.isNaN(value)) {
                    value = p.getFloatValue();
                }
                if (Float.isInfinite(value)) {
                    throw outOfRange(p, label, index);
                }
                return value;
            }
            if (t == JsonToken.VALUE_STRING) {
                return (float) nonFinite(p, label, index);
            }
            throw wrongKind(p, t, label, index, "numbers");
        }

        private double fp64(JsonParser p, JsonToken t, String label, long index) {
            if (t == JsonToken.VALUE_NUMBER_FLOAT || t == JsonToken.VALUE_NUMBER_INT) {
                double value = DecimalText.parseDouble(p.getStringCharacters(), p.getStringOffset(), p.getStringLength());
                if (Double.isNaN(value)) {
                    value = p.getDoubleValue();
                }
                if (Double.isInfinite(value)) {
                    throw outOfRange(p, label, index);
                }
                return value;
            }
            if (t == JsonToken.VALUE_STRING) {
                return nonFinite(p, label, index);
            }
            throw wrongKind(p, t, label, index, "numbers");
        }

        private double nonFinite(JsonParser p, String label, long index) {
            return switch (p.getString()) {
                case "NaN" -> Double.NaN;
                case "Infinity" -> Double.POSITIVE_INFINITY;
                case "-Infinity" -> Double.NEGATIVE_INFINITY;
                default -> throw wrongKind(p, JsonToken.VALUE_STRING, label, index,
                        "numbers (or \"NaN\", \"Infinity\", \"-Infinity\")");
            };
        }

        private InvalidRequestException outOfRange(JsonParser p, String label, long index) {
            return new InvalidRequestException(label + " element " + index + " (" + TensorChecks.abbreviate(p.getString())
                    + ") is out of range for " + type.protocolName() + ".");
        }

        private InvalidRequestException wrongKind(JsonParser p, JsonToken t, String label, long index, String expected) {
            String found = switch (t) {
                case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> "the number " + TensorChecks.abbreviate(p.getString());
                case VALUE_STRING -> "the string " + TensorChecks.quote(p.getString());
                case VALUE_TRUE, VALUE_FALSE -> "a boolean";
                case VALUE_NULL -> "null";
                case START_OBJECT -> "an object";
                default -> t.toString();
            };
            return new InvalidRequestException(label + " element " + index + " is " + found + ", but "
                    + type.protocolName() + " data must be " + expected + ".");
        }
    }

    /** BYTES elements: JSON strings, stored as 4-byte little-endian length plus UTF-8 bytes. */
    private static final class BytesSink implements DataSink {
        private byte[] bytes = new byte[256];
        private int size;

        @Override
        public void accept(JsonParser p, JsonToken t, String label, long index) {
            if (t != JsonToken.VALUE_STRING) {
                throw new InvalidRequestException(label + " element " + index + " is not a string, but BYTES data"
                        + " must be strings.");
            }
            byte[] element = utf8(p.getString(), label, index);
            ensure(label, Integer.BYTES + element.length);
            ByteBuffer.wrap(bytes, size, Integer.BYTES).order(ByteOrder.LITTLE_ENDIAN).putInt(element.length);
            System.arraycopy(element, 0, bytes, size + Integer.BYTES, element.length);
            size += Integer.BYTES + element.length;
        }

        /**
         * The element's UTF-8 bytes. A lone surrogate (JSON's {@code "\ud800"}) has none:
         * refused, where {@link String#getBytes} would quietly write {@code ?} in its place.
         */
        private static byte[] utf8(String element, String label, long index) {
            if (element.chars().noneMatch(c -> Character.isSurrogate((char) c))) {
                return element.getBytes(StandardCharsets.UTF_8);  // the usual text: no encoder to make
            }
            try {
                ByteBuffer encoded = StandardCharsets.UTF_8.newEncoder().encode(java.nio.CharBuffer.wrap(element));
                return Arrays.copyOfRange(encoded.array(), encoded.arrayOffset() + encoded.position(),
                        encoded.arrayOffset() + encoded.limit());
            } catch (java.nio.charset.CharacterCodingException e) {
                throw new InvalidRequestException(label + " element " + index + " is not valid Unicode text (a lone"
                        + " surrogate); BYTES elements in JSON must be text.");
            }
        }

        private void ensure(String label, int more) {
            long needed = (long) size + more;
            if (needed > MAX_TENSOR_BYTES) {
                throw new InvalidRequestException(label + " BYTES data would need more than " + MAX_TENSOR_BYTES
                        + " bytes, the most one tensor can hold.");
            }
            if (needed > bytes.length) {
                bytes = Arrays.copyOf(bytes, (int) Math.min(MAX_TENSOR_BYTES, Math.max(needed, 2L * bytes.length)));
            }
        }

        @Override
        public ByteBuffer finish() {
            ByteBuffer data = ByteBuffer.allocateDirect(size).order(ByteOrder.LITTLE_ENDIAN);
            return data.put(bytes, 0, size).flip();
        }
    }
}
