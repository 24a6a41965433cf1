package io.etserve.protocol;

import static io.etserve.protocol.ProtocolTestSupport.bytesOf;
import static io.etserve.protocol.ProtocolTestSupport.concat;
import static io.etserve.protocol.ProtocolTestSupport.le;
import static io.etserve.protocol.ProtocolTestSupport.lengthPrefixed;
import static io.etserve.protocol.ProtocolTestSupport.tensor;
import static io.etserve.protocol.ProtocolTestSupport.utf8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.Tensor;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class InferResponseEncoderTest {

    private final InferResponseEncoder encoder = new InferResponseEncoder();

    private static String text(EncodedResponse r) {
        return new String(r.body(), StandardCharsets.UTF_8);
    }

    private EncodedResponse encode(Set<String> binary, Tensor... outputs) {
        return encoder.encode(new InferenceResponse("net", null, null, List.of(outputs), binary));
    }

    @Test
    void jsonOnlyResponseOmitsAbsentVersionAndId() {
        Tensor y = tensor("y", DataType.INT32, new long[] {2, 1}, bytesOf(le(8).putInt(-3).putInt(40).flip()));

        EncodedResponse r = encode(Set.of(), y);

        assertThat(text(r)).isEqualTo("{\"model_name\":\"net\",\"outputs\":[{\"name\":\"y\",\"datatype\":\"INT32\","
                + "\"shape\":[2,1],\"data\":[-3,40]}]}");
        assertThat(r.contentType()).isEqualTo("application/json");
        assertThat(r.inferenceHeaderContentLength()).isEmpty();
    }

    /** The array is sized from an estimate; text that escapes to more than that still comes out whole. */
    @Test
    void aResponseLongerThanItsEstimateIsWrittenWhole() {
        String id = "\u0001".repeat(300);  // six bytes each, written as \\u0001
        Tensor y = tensor("y", DataType.INT64, new long[] {1, 1, 1, 1},
                bytesOf(le(8).putLong(Long.MIN_VALUE).flip()));
        EncodedResponse r = encoder.encode(new InferenceResponse("net", "1", id, List.of(y), Set.of()));

        assertThat(text(r)).isEqualTo("{\"model_name\":\"net\",\"model_version\":\"1\",\"id\":\""
                + "\\u0001".repeat(300) + "\",\"outputs\":[{\"name\":\"y\",\"datatype\":\"INT64\","
                + "\"shape\":[1,1,1,1],\"data\":[-9223372036854775808]}]}");
    }

    @Test
    void fp32IsWrittenAsFloatNotWidenedDouble() {
        Tensor y = tensor("y", DataType.FP32, new long[] {3},
                bytesOf(le(12).putFloat(0.1f).putFloat(1e-7f).putFloat(123456.79f).flip()));

        assertThat(text(encode(Set.of(), y))).contains("\"data\":[0.1,1.0E-7,123456.79]");
    }

    @Test
    void everyFiniteFloatAndDoubleTextReadsBackToTheSameBits() {
        java.util.Random random = new java.util.Random(7);
        int n = 20_000;
        ByteBuffer floats = le(4 * n);
        ByteBuffer doubles = le(8 * n);
        int[] floatBits = new int[n];
        long[] doubleBits = new long[n];
        for (int i = 0; i < n; i++) {
            do {
                floatBits[i] = random.nextInt();
            } while (!Float.isFinite(Float.intBitsToFloat(floatBits[i])));
            do {
                doubleBits[i] = random.nextLong();
            } while (!Double.isFinite(Double.longBitsToDouble(doubleBits[i])));
            floats.putInt(floatBits[i]);
            doubles.putLong(doubleBits[i]);
        }

        String json = text(encode(Set.of(),
                tensor("f", DataType.FP32, new long[] {n}, bytesOf(floats.flip())),
                tensor("d", DataType.FP64, new long[] {n}, bytesOf(doubles.flip()))));

        String[] floatTexts = dataOf(json, 0).split(",");
        String[] doubleTexts = dataOf(json, 1).split(",");
        assertThat(floatTexts).hasSize(n);
        assertThat(doubleTexts).hasSize(n);
        for (int i = 0; i < n; i++) {
            // -0.0 and 0.0 differ in bits, so compare bits, not values.
            assertThat(Float.floatToRawIntBits(Float.parseFloat(floatTexts[i]))).as(floatTexts[i]).isEqualTo(floatBits[i]);
            assertThat(Double.doubleToRawLongBits(Double.parseDouble(doubleTexts[i]))).as(doubleTexts[i])
                    .isEqualTo(doubleBits[i]);
        }
    }

    /** The text between the brackets of the index-th output's "data" array (flat arrays only). */
    private static String dataOf(String json, int index) {
        int start = -1;
        for (int i = 0; i <= index; i++) {
            start = json.indexOf("\"data\":[", start + 1);
        }
        return json.substring(start + 8, json.indexOf(']', start));
    }

    @Test
    void nonFiniteFloatsBecomeStrings() {
        Tensor f = tensor("f", DataType.FP32, new long[] {3}, bytesOf(le(12)
                .putFloat(Float.NaN).putFloat(Float.POSITIVE_INFINITY).putFloat(Float.NEGATIVE_INFINITY).flip()));
        Tensor d = tensor("d", DataType.FP64, new long[] {2}, bytesOf(le(16)
                .putDouble(Double.NaN).putDouble(Double.NEGATIVE_INFINITY).flip()));

        String json = text(encode(Set.of(), f, d));

        assertThat(json).contains("\"data\":[\"NaN\",\"Infinity\",\"-Infinity\"]")
                .contains("\"data\":[\"NaN\",\"-Infinity\"]");
    }

    @Test
    void mixedBinaryAndJsonOutputs() {
        byte[] aBytes = bytesOf(le(8).putFloat(1.25f).putFloat(-8f).flip());
        byte[] cBytes = {1, 0, 1};
        Tensor a = tensor("a", DataType.FP32, new long[] {2}, aBytes);
        Tensor b = tensor("b", DataType.UINT8, new long[] {2}, new byte[] {(byte) 200, 3});
        Tensor c = tensor("c", DataType.BOOL, new long[] {3}, cBytes);

        EncodedResponse r = encoder.encode(new InferenceResponse("net", "2", "id\"1", List.of(a, b, c), Set.of("a", "c")));

        String expectedJson = "{\"model_name\":\"net\",\"model_version\":\"2\",\"id\":\"id\\\"1\",\"outputs\":["
                + "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[2],\"parameters\":{\"binary_data_size\":8}},"
                + "{\"name\":\"b\",\"datatype\":\"UINT8\",\"shape\":[2],\"data\":[200,3]},"
                + "{\"name\":\"c\",\"datatype\":\"BOOL\",\"shape\":[3],\"parameters\":{\"binary_data_size\":3}}]}";
        assertThat(r.contentType()).isEqualTo("application/octet-stream");
        assertThat(r.inferenceHeaderContentLength()).hasValue(utf8(expectedJson).length);
        assertThat(r.body()).containsExactly(concat(utf8(expectedJson), aBytes, cBytes));
    }

    @Test
    void halfPrecisionIsForcedToBinary() {
        byte[] half = {0x00, 0x3C};
        Tensor h = tensor("h", DataType.FP16, new long[] {1}, half);

        EncodedResponse r = encode(Set.of(), h);

        String expectedJson = "{\"model_name\":\"net\",\"outputs\":[{\"name\":\"h\",\"datatype\":\"FP16\","
                + "\"shape\":[1],\"parameters\":{\"binary_data_size\":2}}]}";
        assertThat(r.contentType()).isEqualTo("application/octet-stream");
        assertThat(r.inferenceHeaderContentLength()).hasValue(utf8(expectedJson).length);
        assertThat(r.body()).containsExactly(concat(utf8(expectedJson), half));
    }

    @Test
    void emptyBinaryOutputStillMakesABinaryResponse() {
        Tensor e = tensor("e", DataType.INT64, new long[] {0}, new byte[0]);

        EncodedResponse r = encode(Set.of("e"), e);

        assertThat(r.contentType()).isEqualTo("application/octet-stream");
        assertThat(r.inferenceHeaderContentLength()).hasValue(r.body().length);
        assertThat(text(r)).endsWith("\"parameters\":{\"binary_data_size\":0}}]}");
    }

    @Test
    void bytesOutputsAsStringsUnlessNotUtf8() {
        Tensor s = tensor("s", DataType.BYTES, new long[] {2}, lengthPrefixed(utf8("a\"\n"), utf8("\u00e9")));
        byte[] raw = lengthPrefixed(new byte[] {(byte) 0xFF});
        Tensor b = tensor("b", DataType.BYTES, new long[] {1}, raw);

        EncodedResponse r = encode(Set.of(), s, b);

        String expectedJson = "{\"model_name\":\"net\",\"outputs\":["
                + "{\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"a\\\"\\n\",\"\u00e9\"]},"
                + "{\"name\":\"b\",\"datatype\":\"BYTES\",\"shape\":[1],\"parameters\":{\"binary_data_size\":5}}]}";
        assertThat(r.body()).containsExactly(concat(utf8(expectedJson), raw));
    }

    @Test
    void unsignedAndNarrowIntegers() {
        Tensor u64 = tensor("u64", DataType.UINT64, new long[] {2}, bytesOf(le(16).putLong(-1L).putLong(5).flip()));
        Tensor u32 = tensor("u32", DataType.UINT32, new long[] {1}, bytesOf(le(4).putInt(-2).flip()));
        Tensor u16 = tensor("u16", DataType.UINT16, new long[] {1}, new byte[] {(byte) 0xFE, (byte) 0xFF});
        Tensor i8 = tensor("i8", DataType.INT8, new long[] {1}, new byte[] {(byte) 0xFE});

        String json = text(encode(Set.of(), u64, u32, u16, i8));

        assertThat(json).contains("\"data\":[18446744073709551615,5]", "\"data\":[4294967294]",
                "\"data\":[65534]", "\"data\":[-2]");
    }

    @Test
    void outputWhoseBytesDisagreeWithItsShapeIsAServerBug() {
        Tensor bad = tensor("bad", DataType.FP32, new long[] {3}, new byte[8]);

        assertThatThrownBy(() -> encode(Set.of(), bad))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("bad");
        Tensor badBytes = tensor("bb", DataType.BYTES, new long[] {2}, lengthPrefixed(utf8("x")));
        assertThatThrownBy(() -> encode(Set.of(), badBytes))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("bb");
    }

    @Test
    void encodingLeavesTheTensorBufferUntouched() {
        ByteBuffer data = ByteBuffer.allocateDirect(4);
        data.put(new byte[] {1, 2, 3, 4}).flip();
        Tensor t = new Tensor("t", DataType.UINT8, new long[] {4}, data);

        encode(Set.of(), t);
        encode(Set.of("t"), t);

        assertThat(data.position()).isZero();
        assertThat(bytesOf(t.data())).containsExactly(1, 2, 3, 4);
    }

    @Test
    void largeOutputSanity() {
        int n = 100_000;
        ByteBuffer expected = le(4 * n);
        for (int i = 0; i < n; i++) {
            expected.putInt(i * 7);
        }
        Tensor big = tensor("big", DataType.INT32, new long[] {n}, bytesOf(expected.flip()));

        String json = text(encode(Set.of(), big));

        String data = json.substring(json.indexOf("\"data\":[") + 8, json.lastIndexOf("]}]}"));
        String[] values = data.split(",");
        assertThat(values).hasSize(n);
        assertThat(values[0]).isEqualTo("0");
        assertThat(values[n - 1]).isEqualTo(Integer.toString((n - 1) * 7));
    }
}
