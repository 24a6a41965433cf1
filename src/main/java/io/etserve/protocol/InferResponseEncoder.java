package io.etserve.protocol;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.Tensor;
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
 * <p>Outputs in {@link InferenceResponse#sharedMemoryOutputs()} were written to the client's
 * shared memory: as Triton answers them, they carry their name, datatype and shape only.
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

    public EncodedResponse encode(InferenceResponse response) {
        Objects.requireNonNull(response.modelName(), "modelName");
        List<Tensor> outputs = response.outputs();
        int n = outputs.size();
        boolean[] binary = new boolean[n];
        boolean[] elsewhere = new boolean[n];  // written to shared memory: name, datatype and shape only
        List<String>[] strings = null;  // BYTES outputs' elements, made only when there are some
        // The array is sized from what will be written, a little over: growing it copies it, and
        // a fixed allowance would be most of a small response's allocation.
        long estimate = 56 + jsonLength(response.modelName()) + jsonLength(response.modelVersion())
                + jsonLength(response.id());
        long binaryBytes = 0;
        for (int i = 0; i < n; i++) {
            Tensor t = outputs.get(i);
            estimate += 72 + jsonLength(t.name()) + 12L * t.rank();
            if (!response.sharedMemoryOutputs().isEmpty() && response.sharedMemoryOutputs().contains(t.name())) {
                elsewhere[i] = true;
                continue;
            }
            boolean bytes = t.dataType().kind() == DataType.Kind.BYTES;
            List<String> elements = bytes ? decodeBytesElements(t) : null;
            if (elements != null) {
                if (strings == null) {
                    strings = newStringLists(n);
                }
                strings[i] = elements;
            }
            binary[i] = response.binaryOutputs().contains(t.name())
                    || !t.dataType().jsonRepresentable()
                    || (bytes && elements == null);
            if (!bytes) {
                requireConsistent(t);
            }
            if (!binary[i]) {
                estimate += t.elementCount() * ESTIMATED_JSON_BYTES_PER_ELEMENT;
            } else {
                binaryBytes += t.byteSize();
            }
        }
        if (estimate + binaryBytes <= EncodedResponse.ONE_WRITE_BYTES) {
            estimate += binaryBytes;  // room for a small body's binary sections (EncodedResponse.buffers)
        }

        JsonBytes json = new JsonBytes((int) Math.min(estimate, MAX_INITIAL_BUFFER));
        json.ascii("{\"model_name\":").string(response.modelName());
        if (response.modelVersion() != null) {
            json.ascii(",\"model_version\":").string(response.modelVersion());
        }
        if (response.id() != null) {
            json.ascii(",\"id\":").string(response.id());
        }
        json.ascii(",\"outputs\":[");
        for (int i = 0; i < n; i++) {
            Tensor t = outputs.get(i);
            json.ascii(i == 0 ? "{\"name\":" : ",{\"name\":").string(t.name())
                    .ascii(",\"datatype\":").string(t.dataType().protocolName())
                    .ascii(",\"shape\":[");
            for (int d = 0; d < t.rank(); d++) {
                if (d > 0) {
                    json.ascii(',');
                }
                json.number(t.dim(d));
            }
            json.ascii(']');
            // An output in shared memory ends here, as Triton answers it: the client reads the region.
            if (binary[i]) {
                json.ascii(",\"parameters\":{\"binary_data_size\":").number(t.byteSize()).ascii('}');
            } else if (!elsewhere[i]) {
                json.ascii(",\"data\":[");
                List<String> elements = strings != null ? strings[i] : null;
                if (elements != null) {
                    for (int e = 0; e < elements.size(); e++) {
                        if (e > 0) {
                            json.ascii(',');
                        }
                        json.string(elements.get(e));
                    }
                } else {
                    writeFixed(json, t.dataType(), t.data(), t.elementCount());
                }
                json.ascii(']');
            }
            json.ascii('}');
        }
        json.ascii("]}");

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

    /** A string's JSON text as most are written: quoted, a little over its length for escapes. */
    private static long jsonLength(String text) {
        return text == null ? 0 : 2 + text.length() + (text.length() >> 3);
    }

    @SuppressWarnings("unchecked")
    private static List<String>[] newStringLists(int n) {
        return (List<String>[]) new List<?>[n];
    }

    private static void writeFixed(JsonBytes json, DataType type, ByteBuffer d, long count) {
        for (long i = 0; i < count; i++) {
            if (i > 0) {
                json.ascii(',');
            }
            long bits = type.getBits(d);
            switch (type.kind()) {
                case BOOL -> json.ascii(bits != 0 ? "true" : "false");
                case SIGNED -> json.number(bits);
                // getBits zero-extends, so only a UINT64 past Long.MAX_VALUE reads negative.
                case UNSIGNED -> json.unsignedNumber(bits);
                case FLOAT -> {
                    double v = type.byteSize() == Float.BYTES ? Float.intBitsToFloat((int) bits) : Double.longBitsToDouble(bits);
                    if (!Double.isFinite(v)) {
                        json.string(nonFiniteName(v));
                    } else if (type.byteSize() == Float.BYTES) {
                        json.number((float) v);
                    } else {
                        json.number(v);
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
}
