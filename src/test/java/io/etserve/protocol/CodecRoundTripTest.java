package io.etserve.protocol;

import static io.etserve.protocol.ProtocolTestSupport.LIMITS;
import static io.etserve.protocol.ProtocolTestSupport.bytesOf;
import static io.etserve.protocol.ProtocolTestSupport.le;
import static io.etserve.protocol.ProtocolTestSupport.lengthPrefixed;
import static io.etserve.protocol.ProtocolTestSupport.utf8;
import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.Tensor;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every datatype through the decoder and back out of the encoder, as JSON and as binary. The
 * JSON literals are written in the encoder's canonical form, so the output text must equal the
 * input text; the bytes are built by hand.
 */
class CodecRoundTripTest {

    private final InferRequestDecoder decoder = new InferRequestDecoder();
    private final InferResponseEncoder encoder = new InferResponseEncoder();

    static Stream<Arguments> jsonCases() {
        return Stream.of(
                Arguments.of(DataType.BOOL, "[true,false,true]", new byte[] {1, 0, 1}),
                Arguments.of(DataType.UINT8, "[0,255,7]", new byte[] {0, (byte) 0xFF, 7}),
                Arguments.of(DataType.INT8, "[-128,127,0]", new byte[] {(byte) 0x80, 0x7F, 0}),
                Arguments.of(DataType.UINT16, "[0,65535,258]", new byte[] {0, 0, (byte) 0xFF, (byte) 0xFF, 0x02, 0x01}),
                Arguments.of(DataType.INT16, "[-32768,32767,-1]",
                        new byte[] {0x00, (byte) 0x80, (byte) 0xFF, 0x7F, (byte) 0xFF, (byte) 0xFF}),
                Arguments.of(DataType.UINT32, "[0,4294967295,16909060]", bytesOf(le(12)
                        .putInt(0).putInt(0xFFFF_FFFF).putInt(0x01020304).flip())),
                Arguments.of(DataType.INT32, "[-2147483648,2147483647,-7]", bytesOf(le(12)
                        .putInt(Integer.MIN_VALUE).putInt(Integer.MAX_VALUE).putInt(-7).flip())),
                Arguments.of(DataType.UINT64, "[0,18446744073709551615,9223372036854775808]", bytesOf(le(24)
                        .putLong(0).putLong(-1L).putLong(Long.MIN_VALUE).flip())),
                Arguments.of(DataType.INT64, "[-9223372036854775808,9223372036854775807,42]", bytesOf(le(24)
                        .putLong(Long.MIN_VALUE).putLong(Long.MAX_VALUE).putLong(42).flip())),
                Arguments.of(DataType.FP32, "[0.1,-1.5,3.4028235E38,1.4E-45,1.6777216E7]", bytesOf(le(20)
                        .putFloat(0.1f).putFloat(-1.5f).putFloat(Float.MAX_VALUE).putFloat(Float.MIN_VALUE)
                        .putFloat(16777216f).flip())),
                Arguments.of(DataType.FP64, "[0.1,-1.5,1.7976931348623157E308,4.9E-324]", bytesOf(le(32)
                        .putDouble(0.1).putDouble(-1.5).putDouble(Double.MAX_VALUE).putDouble(Double.MIN_VALUE)
                        .flip())),
                Arguments.of(DataType.BYTES, "[\"ab\",\"\",\"\u00e9\"]",
                        lengthPrefixed(utf8("ab"), new byte[0], new byte[] {(byte) 0xC3, (byte) 0xA9})));
    }

    @ParameterizedTest
    @MethodSource("jsonCases")
    void jsonRoundTrip(DataType type, String data, byte[] expectedBytes) {
        String requestJson = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"" + type.protocolName()
                + "\",\"shape\":[" + elementsIn(data) + "],\"data\":" + data + "}]}";

        InferenceRequest request = decoder.decode(utf8(requestJson), null, LIMITS);

        Tensor input = request.inputs().get(0);
        assertThat(input.dataType()).isEqualTo(type);
        assertThat(input.data().isDirect()).isTrue();
        assertThat(bytesOf(input.data())).containsExactly(expectedBytes);

        EncodedResponse response = encoder.encode(new InferenceResponse("m", "1", null,
                List.of(new Tensor("y", type, input.shape(), input.data())), Set.of()));

        assertThat(response.contentType()).isEqualTo("application/json");
        assertThat(response.inferenceHeaderContentLength()).isEmpty();
        assertThat(new String(response.body(), java.nio.charset.StandardCharsets.UTF_8)).isEqualTo(
                "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"y\",\"datatype\":\""
                        + type.protocolName() + "\",\"shape\":[" + elementsIn(data) + "],\"data\":" + data + "}]}");
    }

    static Stream<Arguments> binaryCases() {
        Stream<Arguments> jsonTypes = jsonCases().map(a -> {
            Object[] args = a.get();
            return Arguments.of(args[0], elementsIn((String) args[1]), args[2]);
        });
        Stream<Arguments> halfFloats = Stream.of(
                // 1.0, -2.0, 65504 (largest finite half) as IEEE binary16
                Arguments.of(DataType.FP16, 3L, new byte[] {0x00, 0x3C, 0x00, (byte) 0xC0, (byte) 0xFF, 0x7B}),
                // 1.0, -2.0, 3.140625 as bfloat16
                Arguments.of(DataType.BF16, 3L, new byte[] {(byte) 0x80, 0x3F, 0x00, (byte) 0xC0, 0x49, 0x40}));
        return Stream.concat(jsonTypes, halfFloats);
    }

    @ParameterizedTest
    @MethodSource("binaryCases")
    void binaryRoundTrip(DataType type, long count, byte[] expectedBytes) {
        String header = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"" + type.protocolName() + "\",\"shape\":[" + count
                + "],\"parameters\":{\"binary_data_size\":" + expectedBytes.length + "}}],"
                + "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":true}}]}";
        ProtocolTestSupport.BinaryBody body = ProtocolTestSupport.BinaryBody.of(header, expectedBytes);

        InferenceRequest request = decoder.decode(body.body(), body.headerLength(), LIMITS);

        Tensor input = request.inputs().get(0);
        assertThat(input.shape()).containsExactly(count);
        assertThat(input.data().isDirect()).isTrue();
        assertThat(bytesOf(input.data())).containsExactly(expectedBytes);
        assertThat(request.outputs()).containsExactly(new InferenceRequest.RequestedOutput("y", true));

        EncodedResponse response = encoder.encode(new InferenceResponse("m", null, "req-7",
                List.of(new Tensor("y", type, input.shape(), input.data())), Set.of("y")));

        String expectedJson = "{\"model_name\":\"m\",\"id\":\"req-7\",\"outputs\":[{\"name\":\"y\",\"datatype\":\""
                + type.protocolName() + "\",\"shape\":[" + count + "],\"parameters\":{\"binary_data_size\":"
                + expectedBytes.length + "}}]}";
        assertThat(response.contentType()).isEqualTo("application/octet-stream");
        assertThat(response.inferenceHeaderContentLength()).hasValue(utf8(expectedJson).length);
        assertThat(response.body()).containsExactly(ProtocolTestSupport.concat(utf8(expectedJson), expectedBytes));
    }

    /** Top-level commas of a flat JSON array literal, plus one; strings here hold no commas. */
    private static long elementsIn(String flatArray) {
        String inner = flatArray.substring(1, flatArray.length() - 1);
        return inner.isEmpty() ? 0 : Arrays.stream(inner.split(",")).count();
    }
}
