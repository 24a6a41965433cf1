package io.etserve.protocol;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.Tensor;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.OptionalInt;
import tools.jackson.core.JsonGenerator;
import tools.jackson.core.ObjectWriteContext;

/**
 * Encodes an {@link InferenceResponse} as a KServe v2 {@code /infer} response body.
 *
 * <p>Outputs named in {@link InferenceResponse#binaryOutputs()} carry
 * {@code "parameters": {"binary_data_size": N}} instead of {@code data}, and their bytes follow
 * the JSON in output order; the result then has an {@code Inference-Header-Content-Length} and
 * content type {@code application/octet-stream}. Two kinds of output are sent as binary even when
 * not asked to: FP16/BF16, which the protocol allows only as binary data, and BYTES outputs whose
 * elements are not valid UTF-8, which a JSON string cannot carry.
 *
 * <p>JSON numbers: FP32 as the shortest decimal that reads back as the same float (never widened
 * to double first), FP64 as double, integers exactly (UINT64 unsigned), BOOL as true/false.
 * JSON has no NaN or infinity, so those are written as the strings {@code "NaN"},
 * {@code "Infinity"} and {@code "-Infinity"}, which {@link InferRequestDecoder} also accepts.
 *
 * <p>An output whose bytes do not match its shape is a server bug and throws
 * {@link IllegalStateException}. Thread-safe.
 */
public final class InferResponseEncoder {

    /** Rough JSON bytes per element, to size the buffer once for typical outputs. */
    private static final int ESTIMATED_JSON_BYTES_PER_ELEMENT = 12;
    private static final int MAX_INITIAL_BUFFER = 64 << 20;
    /** One scratch text per thread: an encode call uses it start to end on its thread. */
    private static final ThreadLocal<Decimals> DECIMALS = ThreadLocal.withInitial(Decimals::new);

    public EncodedResponse encode(InferenceResponse response) {
        Objects.requireNonNull(response.modelName(), "modelName");
        List<Tensor> outputs = response.outputs();
        int n = outputs.size();
        boolean[] binary = new boolean[n];
        List<List<String>> strings = new ArrayList<>(n);
        long estimate = 256;
        for (int i = 0; i < n; i++) {
            Tensor t = outputs.get(i);
            boolean bytes = t.dataType().kind() == DataType.Kind.BYTES;
            List<String> elements = bytes ? decodeBytesElements(t) : null;
            strings.add(elements);
            binary[i] = response.binaryOutputs().contains(t.name())
                    || !t.dataType().jsonRepresentable()
                    || (bytes && elements == null);
            if (!bytes) {
                requireConsistent(t);
            }
            if (!binary[i]) {
                estimate += t.elementCount() * ESTIMATED_JSON_BYTES_PER_ELEMENT;
            }
        }

        ExposedByteArrayOutputStream json = new ExposedByteArrayOutputStream((int) Math.min(estimate, MAX_INITIAL_BUFFER));
        Decimals decimals = DECIMALS.get();
        try (JsonGenerator g = ProtocolJson.FACTORY.createGenerator(ObjectWriteContext.empty(), json)) {
            g.writeStartObject();
            g.writeStringProperty("model_name", response.modelName());
            if (response.modelVersion() != null) {
                g.writeStringProperty("model_version", response.modelVersion());
            }
            if (response.id() != null) {
                g.writeStringProperty("id", response.id());
            }
            g.writeName("outputs");
            g.writeStartArray();
            for (int i = 0; i < n; i++) {
                Tensor t = outputs.get(i);
                g.writeStartObject();
                g.writeStringProperty("name", t.name());
                g.writeStringProperty("datatype", t.dataType().protocolName());
                g.writeName("shape");
                g.writeStartArray();
                for (int d = 0; d < t.rank(); d++) {
                    g.writeNumber(t.dim(d));
                }
                g.writeEndArray();
                if (binary[i]) {
                    int size = t.byteSize();
                    g.writeName("parameters");
                    g.writeStartObject();
                    g.writeNumberProperty("binary_data_size", size);
                    g.writeEndObject();
                } else {
                    g.writeName("data");
                    g.writeStartArray();
                    if (strings.get(i) != null) {
                        for (String s : strings.get(i)) {
                            g.writeString(s);
                        }
                    } else {
                        writeFixed(g, t.dataType(), t.data(), t.elementCount(), decimals);
                    }
                    g.writeEndArray();
                }
                g.writeEndObject();
            }
            g.writeEndArray();
            g.writeEndObject();
        }

        int jsonLength = json.size();
        if (!anyTrue(binary)) {
            return new EncodedResponse(json.buffer(), jsonLength, List.of(), OptionalInt.empty(), EncodedResponse.JSON);
        }
        // The binary sections stay in the output arrays the bridge filled: written to the
        // connection from there (EncodedResponse.writeTo), never copied into one body array.
        List<ByteBuffer> sections = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            if (binary[i]) {
                sections.add(outputs.get(i).data().duplicate());
            }
        }
        return new EncodedResponse(json.buffer(), jsonLength, sections, OptionalInt.of(jsonLength),
                EncodedResponse.OCTET_STREAM);
    }

    private static void writeFixed(JsonGenerator g, DataType type, ByteBuffer d, long count, Decimals decimals) {
        for (long i = 0; i < count; i++) {
            long bits = type.getBits(d);
            switch (type.kind()) {
                case BOOL -> g.writeBoolean(bits != 0);
                case SIGNED -> g.writeNumber(bits);
                case UNSIGNED -> {
                    // getBits zero-extends, so only a UINT64 past Long.MAX_VALUE reads negative.
                    if (bits >= 0) {
                        g.writeNumber(bits);
                    } else {
                        g.writeNumber(Long.toUnsignedString(bits));
                    }
                }
                case FLOAT -> {
                    double v = type.byteSize() == Float.BYTES ? Float.intBitsToFloat((int) bits) : Double.longBitsToDouble(bits);
                    if (!Double.isFinite(v)) {
                        g.writeString(nonFiniteName(v));
                    } else {
                        decimals.write(g, v, type.byteSize() == Float.BYTES);
                    }
                }
                case BYTES -> throw new IllegalStateException("no fixed-size JSON form for " + type);
            }
        }
    }

    private static String nonFiniteName(double v) {
        return Double.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
    }

    private static void requireConsistent(Tensor t) {
        long expected = Math.multiplyExact(t.elementCount(), (long) t.dataType().byteSize());
        int actual = t.byteSize();
        if (actual != expected) {
            throw new IllegalStateException("output '" + t.name() + "' holds " + actual + " bytes but its shape "
                    + Arrays.toString(t.shape()) + " of " + t.dataType().protocolName() + " needs " + expected);
        }
    }

    /**
     * The elements of a BYTES output (4-byte little-endian length, then bytes, each) as strings,
     * or null when one is not valid UTF-8. Malformed framing is a server bug.
     */
    private static List<String> decodeBytesElements(Tensor t) {
        ByteBuffer d = t.data();
        long count = t.elementCount();
        List<String> elements = new ArrayList<>((int) Math.min(count, 1 << 16));
        var decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        boolean utf8 = true;
        for (long i = 0; i < count; i++) {
            if (d.remaining() < Integer.BYTES) {
                throw new IllegalStateException("BYTES output '" + t.name() + "' ends before element " + i);
            }
            int length = d.getInt();
            if (length < 0 || length > d.remaining()) {
                throw new IllegalStateException("BYTES output '" + t.name() + "' element " + i + " overruns its data");
            }
            ByteBuffer element = d.slice(d.position(), length);
            d.position(d.position() + length);
            if (utf8) {
                try {
                    CharBuffer chars = decoder.decode(element);
                    elements.add(chars.toString());
                } catch (CharacterCodingException e) {
                    utf8 = false;
                }
            }
        }
        if (d.hasRemaining()) {
            throw new IllegalStateException("BYTES output '" + t.name() + "' has bytes after its " + count + " elements");
        }
        return utf8 ? elements : null;
    }

    private static boolean anyTrue(boolean[] values) {
        for (boolean v : values) {
            if (v) {
                return true;
            }
        }
        return false;
    }

    /**
     * Floating-point elements as JSON numbers without a String each: from Java 19 on,
     * {@code StringBuilder.append(float)} writes the shortest decimal that reads back as the same
     * value (Schubfach, the algorithm Jackson's own writer uses: the same text) straight into the
     * builder, where Jackson's {@code writeNumber(float)} makes two objects and a String per
     * element. Older JDKs format differently, so they keep Jackson's writer.
     */
    private static final class Decimals {
        private static final boolean SHORTEST_APPEND = Runtime.version().feature() >= 19;

        private final StringBuilder text = new StringBuilder(32);
        private char[] chars = new char[32];

        /** {@code v} as a float ({@code single}: FP32, written as one) or a double. */
        void write(JsonGenerator g, double v, boolean single) {
            if (!SHORTEST_APPEND) {
                if (single) {
                    g.writeNumber((float) v);
                } else {
                    g.writeNumber(v);
                }
                return;
            }
            text.setLength(0);
            if (single) {
                text.append((float) v);
            } else {
                text.append(v);
            }
            flush(g);
        }

        private void flush(JsonGenerator g) {
            int n = text.length();
            if (n > chars.length) {
                chars = new char[n];
            }
            text.getChars(0, n, chars, 0);
            g.writeNumber(chars, 0, n);
        }
    }

    /** Lets the encoder hand out its buffer (and the valid length) without a final copy. */
    private static final class ExposedByteArrayOutputStream extends ByteArrayOutputStream {
        ExposedByteArrayOutputStream(int size) {
            super(size);
        }

        byte[] buffer() {
            return buf;
        }
    }
}
