package io.etserve.protocol;

import static io.etserve.protocol.ProtocolTestSupport.LIMITS;
import static io.etserve.protocol.ProtocolTestSupport.bytesOf;
import static io.etserve.protocol.ProtocolTestSupport.concat;
import static io.etserve.protocol.ProtocolTestSupport.le;
import static io.etserve.protocol.ProtocolTestSupport.lengthPrefixed;
import static io.etserve.protocol.ProtocolTestSupport.utf8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import io.etserve.inference.InferenceRequest.RequestedOutput;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.Tensor;
import io.etserve.protocol.ProtocolTestSupport.BinaryBody;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class InferRequestDecoderTest {

    private final InferRequestDecoder decoder = new InferRequestDecoder();

    private InferenceRequest decode(String json) {
        return decoder.decode(utf8(json), null, LIMITS);
    }

    private InferenceRequest decode(BinaryBody body) {
        return decoder.decode(body.body(), body.headerLength(), LIMITS);
    }

    /** A one-input request around the given input fields. */
    private static String oneInput(String fields) {
        return "{\"inputs\":[{" + fields + "}]}";
    }

    @Nested
    class Accepts {

        @Test
        void requestLevelFields() {
            InferenceRequest r = decode("{\"id\":\"req-1\",\"parameters\":{\"priority\":3,\"tag\":\"a\\\"b\","
                    + "\"ratio\":1.5,\"flag\":true,\"huge\":18446744073709551616},"
                    + "\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[5]}]}");

            assertThat(r.id()).isEqualTo("req-1");
            assertThat(r.parameters()).containsOnly(
                    entry("priority", 3L),
                    entry("tag", "a\"b"),
                    entry("ratio", 1.5),
                    entry("flag", true),
                    entry("huge", new BigInteger("18446744073709551616")));
            assertThat(r.outputs()).isEmpty();
            assertThat(r.binaryOutputByDefault()).isFalse();
        }

        @Test
        void requestedOutputsAndBinaryDefault() {
            InferenceRequest r = decode("{\"parameters\":{\"binary_data_output\":true},"
                    + "\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[5]}],"
                    + "\"outputs\":[{\"name\":\"a\",\"parameters\":{\"binary_data\":true}},{\"name\":\"b\"},"
                    + "{\"name\":\"c\",\"parameters\":{\"binary_data\":false}}]}");

            assertThat(r.binaryOutputByDefault()).isTrue();
            assertThat(r.outputs()).containsExactly(
                    new RequestedOutput("a", true), new RequestedOutput("b", null), new RequestedOutput("c", false));
        }

        @Test
        void nestedRowMajorData() {
            Tensor t = decode(oneInput("\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[2,3],"
                    + "\"data\":[[1,2,3],[4,5,6]]")).inputs().get(0);

            assertThat(t.shape()).containsExactly(2, 3);
            assertThat(bytesOf(t.data())).containsExactly(bytesOf(
                    le(24).putInt(1).putInt(2).putInt(3).putInt(4).putInt(5).putInt(6).flip()));
        }

        @Test
        void irregularNestingCountsOnlyTheTotal() {
            Tensor t = decode(oneInput("\"name\":\"x\",\"datatype\":\"UINT8\",\"shape\":[2,2],"
                    + "\"data\":[[1],[[2,3]],4]")).inputs().get(0);

            assertThat(bytesOf(t.data())).containsExactly(1, 2, 3, 4);
        }

        @Test
        void dataBeforeTheFieldsItDependsOn() {
            Tensor t = decode(oneInput("\"data\":[[1.5],[-2]],\"shape\":[2,1],\"datatype\":\"FP64\",\"name\":\"x\""))
                    .inputs().get(0);

            assertThat(t.name()).isEqualTo("x");
            assertThat(bytesOf(t.data())).containsExactly(bytesOf(le(16).putDouble(1.5).putDouble(-2.0).flip()));
        }

        @Test
        void deferredDataIsStillValidatedAgainstTheInputItBelongsTo() {
            assertThatThrownBy(() -> decode(oneInput("\"data\":[300],\"datatype\":\"UINT8\",\"shape\":[1],\"name\":\"late\"")))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("Input 'late' element 0 (300) is out of range for UINT8.");
        }

        @Test
        void scalarAndEmptyShapes() {
            InferenceRequest r = decode("{\"inputs\":["
                    + "{\"name\":\"scalar\",\"datatype\":\"FP32\",\"shape\":[],\"data\":[2.5]},"
                    + "{\"name\":\"empty\",\"datatype\":\"FP32\",\"shape\":[0,4],\"data\":[]},"
                    + "{\"name\":\"hugeButEmpty\",\"datatype\":\"FP32\",\"shape\":[1099511627776,1099511627776,0],\"data\":[[]]}]}");

            assertThat(r.inputs().get(0).elementCount()).isEqualTo(1);
            assertThat(bytesOf(r.inputs().get(0).data())).containsExactly(bytesOf(le(4).putFloat(2.5f).flip()));
            assertThat(r.inputs().get(1).data().remaining()).isZero();
            assertThat(r.inputs().get(2).data().remaining()).isZero();
        }

        @Test
        void floatsParsedStraightToFloatWithoutDoubleRounding() {
            // Just below the midpoint of 1+2^-23 and 1+2^-22: the nearest float is 1+2^-23, but
            // rounding through the nearest double (exactly the midpoint) would give 1+2^-22.
            Tensor t = decode(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],"
                    + "\"data\":[1.00000017881393432617187499]")).inputs().get(0);

            assertThat(t.data().getFloat(0)).isEqualTo(1.0f + 0x1p-23f);
        }

        @Test
        void fp32AcceptsIntegersAndNonFiniteStrings() {
            Tensor t = decode(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[4],"
                    + "\"data\":[3,\"NaN\",\"Infinity\",\"-Infinity\"]")).inputs().get(0);
            ByteBuffer d = t.data();

            assertThat(d.getFloat(0)).isEqualTo(3.0f);
            assertThat(d.getFloat(4)).isNaN();
            assertThat(d.getFloat(8)).isEqualTo(Float.POSITIVE_INFINITY);
            assertThat(d.getFloat(12)).isEqualTo(Float.NEGATIVE_INFINITY);
        }

        @Test
        void mixedJsonAndBinaryInputsTakeTheirChunksInInputOrder() {
            byte[] a = bytesOf(le(8).putFloat(1f).putFloat(2f).flip());
            byte[] c = bytesOf(le(2).putShort((short) -3).flip());
            BinaryBody body = BinaryBody.of("{\"inputs\":["
                    + "{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[2],\"parameters\":{\"binary_data_size\":8}},"
                    + "{\"name\":\"b\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[9]},"
                    + "{\"name\":\"c\",\"datatype\":\"INT16\",\"shape\":[1],\"parameters\":{\"binary_data_size\":2}}]}",
                    a, c);

            InferenceRequest r = decode(body);

            assertThat(r.inputs()).extracting(Tensor::name).containsExactly("a", "b", "c");
            assertThat(bytesOf(r.inputs().get(0).data())).containsExactly(a);
            assertThat(bytesOf(r.inputs().get(1).data())).containsExactly(9);
            assertThat(bytesOf(r.inputs().get(2).data())).containsExactly(c);
            assertThat(r.inputs()).allSatisfy(t -> assertThat(t.data().isDirect()).isTrue());
        }

        @Test
        void headerLengthEqualToBodyMeansNoBinaryData() {
            byte[] json = utf8(oneInput("\"name\":\"x\",\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[true]"));

            Tensor t = decoder.decode(json, json.length, LIMITS).inputs().get(0);

            assertThat(bytesOf(t.data())).containsExactly(1);
        }

        @Test
        void utf8ByteOrderMarkAndUnicodeNames() {
            byte[] json = concat(new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF},
                    utf8(oneInput("\"data\":[7],\"name\":\"\u00fcber\",\"datatype\":\"INT8\",\"shape\":[1]")));

            Tensor t = decoder.decode(json, null, LIMITS).inputs().get(0);

            assertThat(t.name()).isEqualTo("\u00fcber");
            assertThat(bytesOf(t.data())).containsExactly(7);
        }

        @Test
        void unknownFieldsAreSkipped() {
            InferenceRequest r = decode("{\"future\":{\"a\":[1,{\"b\":2}]},\"inputs\":[{\"name\":\"x\",\"extra\":[[]],"
                    + "\"datatype\":\"UINT16\",\"shape\":[1],\"data\":[1]}]}");

            assertThat(r.inputs()).hasSize(1);
        }

        @Test
        void bytesAsJsonStringsAndAsBinary() {
            byte[] binary = lengthPrefixed(new byte[] {0, (byte) 0xFF}, utf8("hi"));
            BinaryBody body = BinaryBody.of("{\"inputs\":["
                    + "{\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"a\\u0000\",\"\\u20ac\"]},"
                    + "{\"name\":\"b\",\"datatype\":\"BYTES\",\"shape\":[2],\"parameters\":{\"binary_data_size\":"
                    + binary.length + "}}]}", binary);

            InferenceRequest r = decode(body);

            assertThat(bytesOf(r.inputs().get(0).data())).containsExactly(
                    lengthPrefixed(new byte[] {'a', 0}, new byte[] {(byte) 0xE2, (byte) 0x82, (byte) 0xAC}));
            assertThat(bytesOf(r.inputs().get(1).data())).containsExactly(binary);

            // A lone surrogate is no text: refused, not stored as '?'.
            assertThatThrownBy(() -> decode("{\"inputs\":[{\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[1],"
                    + "\"data\":[\"\\ud800\"]}]}")).isInstanceOf(InvalidRequestException.class)
                    .hasMessage("Input 's' element 0 is not valid Unicode text (a lone surrogate); BYTES elements in JSON"
                            + " must be text.");
        }

        @Test
        void aHundredThousandTinyElements() {
            int n = 100_000;
            StringBuilder json = new StringBuilder("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[")
                    .append(n).append("],\"data\":[");
            for (int i = 0; i < n; i++) {
                json.append(i == 0 ? "" : ",").append(i).append(".5");
            }
            json.append("]}]}");

            Tensor t = decode(json.toString()).inputs().get(0);

            ByteBuffer d = t.data();
            assertThat(d.remaining()).isEqualTo(4 * n);
            for (int i : new int[] {0, 1, 4_097, 65_536, n - 1}) {
                assertThat(d.getFloat(4 * i)).isEqualTo(i + 0.5f);
            }
        }
    }

    @Nested
    class Refuses {

        private void assertRefused(String json, String expectedMessage) {
            assertThatThrownBy(() -> decode(json))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage(expectedMessage);
        }

        private void assertRefusedContaining(String json, String... fragments) {
            assertThatThrownBy(() -> decode(json))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessageContainingAll(fragments);
        }

        private void assertRefused(BinaryBody body, String expectedMessage) {
            assertThatThrownBy(() -> decode(body))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage(expectedMessage);
        }

        @Test
        void malformedJson() {
            assertRefusedContaining("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1,]}]}",
                    "Input 'x' is not valid JSON");
            assertRefusedContaining("{\"inputs\":[", "is not valid JSON");
            assertRefusedContaining("{inputs:[]}", "The request is not valid JSON");
            assertRefusedContaining(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[NaN]"),
                    "Input 'x' is not valid JSON");
            // What Python's json module writes for a NaN: told how to send it, not how to configure Jackson.
            assertThatThrownBy(() -> decode(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[NaN]")))
                    .hasMessageContaining("the strings \"NaN\", \"Infinity\"").hasMessageNotContaining("JsonReadFeature");
        }

        @Test
        void notAnObjectOrEmpty() {
            assertRefused("[1,2]", "The request body must be a JSON object.");
            assertRefused("", "The request body must be a JSON object.");
            assertRefused("{\"inputs\":[]} {}", "The request's JSON has content after its closing brace.");
        }

        @Test
        void missingOrMistypedRequestFields() {
            assertRefused("{}", "The request has no 'inputs'.");
            assertRefused("{\"inputs\":{}}", "The request's 'inputs' must be an array.");
            assertRefused("{\"inputs\":[1]}", "Input #0 must be a JSON object.");
            assertRefused("{\"id\":7,\"inputs\":[]}", "The request 'id' must be a string.");
            assertRefused("{\"parameters\":[],\"inputs\":[]}", "The request 'parameters' must be a JSON object.");
            assertRefused("{\"parameters\":{\"p\":{\"q\":1}},\"inputs\":[]}",
                    "The request parameter 'p' must be a string, number or boolean.");
            assertRefused("{\"parameters\":{\"p\":null},\"inputs\":[]}",
                    "The request parameter 'p' must be a string, number or boolean.");
            assertRefused("{\"parameters\":{\"binary_data_output\":\"yes\"},\"inputs\":[]}",
                    "The request parameter 'binary_data_output' must be a boolean.");
        }

        @Test
        void missingInputFields() {
            assertRefused(oneInput("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]"), "Input #0 has no 'name'.");
            assertRefused(oneInput("\"name\":\"x\",\"shape\":[1],\"data\":[1]"), "Input 'x' has no 'datatype'.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"data\":[1]"), "Input 'x' has no 'shape'.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1]"),
                    "Input 'x' has neither 'data' nor binary_data_size nor shared_memory_region.");
        }

        @Test
        void mistypedInputFields() {
            assertRefused(oneInput("\"name\":5,\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]"),
                    "Input #0 'name' must be a string.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":1,\"shape\":[1],\"data\":[1]"),
                    "Input 'x' 'datatype' must be a string.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FLOAT32\",\"shape\":[1],\"data\":[1]"),
                    "Input 'x' has unknown datatype 'FLOAT32'.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":\"1\",\"data\":[1]"),
                    "Input 'x' 'shape' must be an array of non-negative integers.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1.0],\"data\":[1]"),
                    "Input 'x' 'shape' must be an array of non-negative integers.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[[1]],\"data\":[1]"),
                    "Input 'x' 'shape' must be an array of non-negative integers.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":1"),
                    "Input 'x' 'data' must be an array.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":{}"),
                    "Input 'x' 'data' must be an array.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"parameters\":3,\"data\":[1]"),
                    "Input 'x' 'parameters' must be a JSON object.");
        }

        @Test
        void negativeAndOversizedDimensions() {
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,-1],\"data\":[1,2]"),
                    "Input 'x' has negative dimension -1 in its shape.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[99999999999999999999],\"data\":[]"),
                    "Input 'x' has dimension 99999999999999999999, which is too large.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1099511627776,1099511627776],\"data\":[]"),
                    "Input 'x' has shape [1099511627776, 1099511627776], whose element count overflows 64 bits.");
            String rank33 = "1" + ",1".repeat(32);
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" + rank33 + "],\"data\":[1]"),
                    "Input 'x' has more than 32 dimensions.");
        }

        @Test
        void elementCountMismatch() {
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[2,3],\"data\":[1,2,3,4,5]"),
                    "Input 'x' has 5 data elements but its shape [2, 3] needs 6.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[2,2],\"data\":[[1,2],[3,4],[5]]"),
                    "Input 'x' has more data elements than its shape [2, 2] holds (4).");
        }

        @Test
        void elementLimitIsCheckedBeforeAllocating() {
            DecodeLimits small = new DecodeLimits(10, 4);
            assertThatThrownBy(() -> decoder.decode(
                    utf8(oneInput("\"name\":\"x\",\"datatype\":\"FP64\",\"shape\":[11],\"data\":[]")), null, small))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("Input 'x' has 11 elements, more than the limit of 10 per tensor.");
            // Within an unlimited element budget, a shape the JSON cannot possibly fill is refused
            // before its (here 8 GB) buffer is allocated.
            DecodeLimits unlimited = new DecodeLimits(Long.MAX_VALUE, 4);
            byte[] json = utf8(oneInput("\"name\":\"x\",\"datatype\":\"FP64\",\"shape\":[1000000000],\"data\":[1]"));
            assertThatThrownBy(() -> decoder.decode(json, null, unlimited))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("Input 'x' has shape [1000000000] of 1000000000 elements, more than its "
                            + json.length + "-byte JSON could hold.");
            // Binary data must be present in full, so its size check precedes allocation too.
            BinaryBody body = BinaryBody.of(oneInput("\"name\":\"x\",\"datatype\":\"FP64\",\"shape\":[1000000000],"
                    + "\"parameters\":{\"binary_data_size\":8000000000}"));
            assertThatThrownBy(() -> decoder.decode(body.body(), body.headerLength(), unlimited))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("Input 'x' declares binary_data_size 8000000000 but only 0 bytes of binary data remain.");
        }

        @Test
        void tooManyInputs() {
            DecodeLimits two = new DecodeLimits(100, 2);
            String input = "{\"name\":\"%s\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[1]}";
            String json = "{\"inputs\":[" + input.formatted("a") + "," + input.formatted("b") + "," + input.formatted("c") + "]}";
            assertThatThrownBy(() -> decoder.decode(utf8(json), null, two))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("The request has more than 2 inputs, the most allowed.");
        }

        @Test
        void duplicates() {
            String input = "{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[1]}";
            assertRefused("{\"inputs\":[" + input + "," + input + "]}", "Input 'x' appears more than once.");
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],\"shape\":[2],\"data\":[1]"),
                    "Input 'x' has 'shape' more than once.");
            assertRefused(oneInput("\"datatype\":\"INT8\",\"datatype\":\"INT8\",\"name\":\"x\",\"shape\":[1],\"data\":[1]"),
                    "Input #0 has 'datatype' more than once.");
            assertRefused("{\"inputs\":[],\"inputs\":[]}", "The request has 'inputs' more than once.");
            assertRefused("{\"inputs\":[],\"outputs\":[{\"name\":\"y\",\"name\":\"z\"}]}",
                    "Requested output 'y' has 'name' more than once.");
            assertRefused("{\"inputs\":[],\"parameters\":{\"a\":1,\"a\":2}}",
                    "The request parameter 'a' appears more than once.");
            // A tensor's parameters too, whether few (a scan) or many (a set), kept or not.
            String keys = IntStream.range(0, 12).mapToObj(i -> "\"k" + i + "\":" + i).collect(Collectors.joining(","));
            for (String params : new String[] {"\"k1\":1,\"k1\":2", keys + ",\"k3\":0", keys + ",\"binary_data\":true,\"binary_data\":true"}) {
                String repeated = params.substring(params.lastIndexOf(',') + 1, params.lastIndexOf(':'));
                assertRefused("{\"inputs\":[],\"outputs\":[{\"name\":\"y\",\"parameters\":{" + params + "}}]}",
                        "Requested output 'y' parameter '" + repeated.replace("\"", "") + "' appears more than once.");
            }
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[1],\"parameters\":{"
                    + keys + ",\"k11\":[1]}"), "Input 'x' parameter 'k11' must be a string, number or boolean.");
            assertThat(decoder.decode(utf8("{\"inputs\":[],\"outputs\":[{\"name\":\"y\",\"parameters\":{" + keys
                    + ",\"binary_data\":true}},{\"name\":\"z\",\"parameters\":{\"k1\":1}}]}"), null, LIMITS).outputs())
                    .extracting(InferenceRequest.RequestedOutput::binary).containsExactly(true, null);
            // Fields the decoder does not read are skipped, repeats and all.
            assertThat(decoder.decode(utf8("{\"inputs\":[],\"extra\":1,\"extra\":2}"), null, LIMITS).inputs()).isEmpty();
            assertRefused("{\"inputs\":[],\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}]}",
                    "Requested output 'y' is requested more than once.");
            String many = IntStream.range(0, 12).mapToObj(i -> "{\"name\":\"o" + i + "\"}")
                    .collect(Collectors.joining(","));
            assertRefused("{\"inputs\":[],\"outputs\":[" + many + ",{\"name\":\"o3\"}]}",
                    "Requested output 'o3' is requested more than once.");
            assertThat(decoder.decode(utf8("{\"inputs\":[],\"outputs\":[" + many + "]}"), null, LIMITS).outputs())
                    .hasSize(12);
        }

        @ParameterizedTest(name = "{0} {1}")
        @CsvSource(delimiter = '|', textBlock = """
                UINT8  | 300                  | element 0 (300) is out of range for UINT8.
                UINT8  | -1                   | element 0 (-1) is out of range for UINT8.
                INT8   | 128                  | element 0 (128) is out of range for INT8.
                INT8   | -129                 | element 0 (-129) is out of range for INT8.
                UINT16 | 65536                | element 0 (65536) is out of range for UINT16.
                INT16  | -32769               | element 0 (-32769) is out of range for INT16.
                UINT32 | 4294967296           | element 0 (4294967296) is out of range for UINT32.
                INT32  | 2147483648           | element 0 (2147483648) is out of range for INT32.
                INT64  | 9223372036854775808  | element 0 (9223372036854775808) is out of range for INT64.
                UINT64 | 18446744073709551616 | element 0 (18446744073709551616) is out of range for UINT64.
                UINT64 | -1                   | element 0 (-1) is out of range for UINT64.
                FP32   | 3.5e38               | element 0 (3.5e38) is out of range for FP32.
                FP32   | 1e39                 | element 0 (1e39) is out of range for FP32.
                FP64   | 1e309                | element 0 (1e309) is out of range for FP64.
                INT32  | 1.5                  | element 0 is the number 1.5, but INT32 data must be integers.
                INT64  | 1.0                  | element 0 is the number 1.0, but INT64 data must be integers.
                UINT8  | 1e2                  | element 0 is the number 1e2, but UINT8 data must be integers.
                INT32  | true                 | element 0 is a boolean, but INT32 data must be integers.
                FP32   | true                 | element 0 is a boolean, but FP32 data must be numbers.
                FP64   | null                 | element 0 is null, but FP64 data must be numbers.
                FP32   | "1.5"                | element 0 is the string '1.5', but FP32 data must be numbers (or "NaN", "Infinity", "-Infinity").
                FP32   | "nan"                | element 0 is the string 'nan', but FP32 data must be numbers (or "NaN", "Infinity", "-Infinity").
                INT8   | "NaN"                | element 0 is the string 'NaN', but INT8 data must be integers.
                BOOL   | 1                    | element 0 is the number 1, but BOOL data must be true or false.
                BOOL   | "true"               | element 0 is the string 'true', but BOOL data must be true or false.
                INT16  | {}                   | element 0 is an object, but INT16 data must be integers.
                BYTES  | 7                    | element 0 is not a string, but BYTES data must be strings.
                """)
        void valuesTheDatatypeCannotHold(String type, String value, String expected) {
            assertRefused(oneInput("\"name\":\"v\",\"datatype\":\"" + type + "\",\"shape\":[1],\"data\":[" + value + "]"),
                    "Input 'v' " + expected);
        }

        @Test
        void outOfRangeElementReportsItsFlatIndex() {
            assertRefused(oneInput("\"name\":\"v\",\"datatype\":\"UINT8\",\"shape\":[2,2],\"data\":[[1,2],[3,256]]"),
                    "Input 'v' element 3 (256) is out of range for UINT8.");
        }

        @Test
        void halfPrecisionOnlyAsBinary() {
            assertRefused(oneInput("\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[1],\"data\":[1.0]"),
                    "Input 'h' has datatype FP16, which can only be sent as binary data (binary_data_size).");
            assertRefused(oneInput("\"name\":\"h\",\"datatype\":\"BF16\",\"shape\":[1],\"data\":[1.0]"),
                    "Input 'h' has datatype BF16, which can only be sent as binary data (binary_data_size).");
        }

        @Test
        void binarySizesThatDoNotAddUp() {
            String fp32x2 = "\"name\":\"b\",\"datatype\":\"FP32\",\"shape\":[2],\"parameters\":{\"binary_data_size\":%s}";
            assertRefused(BinaryBody.of(oneInput(fp32x2.formatted("8")), new byte[9]),
                    "The request carries 9 bytes of binary data but its inputs' binary_data_size add up to 8.");
            assertRefused(BinaryBody.of(oneInput(fp32x2.formatted("8")), new byte[7]),
                    "Input 'b' declares binary_data_size 8 but only 7 bytes of binary data remain.");
            assertRefused(BinaryBody.of(oneInput(fp32x2.formatted("4")), new byte[4]),
                    "Input 'b' declares binary_data_size 4, but 2 FP32 elements (shape [2]) need 8 bytes.");
            assertRefused(BinaryBody.of(oneInput(fp32x2.formatted("-8")), new byte[8]),
                    "Input 'b' binary_data_size must be a non-negative integer.");
            assertRefused(BinaryBody.of(oneInput(fp32x2.formatted("8.0")), new byte[8]),
                    "Input 'b' binary_data_size must be a non-negative integer.");
            assertRefused(BinaryBody.of(oneInput(fp32x2.formatted("\"8\"")), new byte[8]),
                    "Input 'b' binary_data_size must be a non-negative integer.");
            assertRefused(BinaryBody.of(oneInput(fp32x2.formatted("8") + ",\"data\":[1,2]"), new byte[8]),
                    "Input 'b' has both 'data' and binary_data_size.");
            assertRefused(BinaryBody.of("{\"inputs\":[]}", new byte[3]),
                    "The request carries 3 bytes of binary data but its inputs' binary_data_size add up to 0.");
            assertRefused(oneInput(fp32x2.formatted("0").replace("[2]", "[0]")),
                    "Input 'b' has binary_data_size but the request has no Inference-Header-Content-Length header.");
        }

        @Test
        void binaryBooleansAreTheBytesZeroOrOne() {
            String bool3 = "\"name\":\"b\",\"datatype\":\"BOOL\",\"shape\":[3],\"parameters\":{\"binary_data_size\":3}";
            InferenceRequest ok = decode(BinaryBody.of(oneInput(bool3), new byte[] {1, 0, 1}));
            assertThat(ok.inputs().get(0).data().get(0)).isEqualTo((byte) 1);
            assertRefused(BinaryBody.of(oneInput(bool3), new byte[] {1, 2, 0}),
                    "Input 'b' BOOL element 1 is byte 2; a BOOL element is the byte 0 or 1.");
        }

        @Test
        void malformedBinaryBytes() {
            String bytesInput = "\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[%d],\"parameters\":{\"binary_data_size\":%d}";
            byte[] twoElements = lengthPrefixed(utf8("ab"), utf8("c"));
            assertRefused(BinaryBody.of(oneInput(bytesInput.formatted(3, twoElements.length)), twoElements),
                    "Input 's' binary BYTES data ends before element 2 of 3.");
            assertRefused(BinaryBody.of(oneInput(bytesInput.formatted(1, twoElements.length)), twoElements),
                    "Input 's' binary BYTES data has 5 bytes after its 1 elements.");
            byte[] overrun = {5, 0, 0, 0, 'a'};
            assertRefused(BinaryBody.of(oneInput(bytesInput.formatted(1, overrun.length)), overrun),
                    "Input 's' binary BYTES element 0 declares 5 bytes, more than its data holds.");
            byte[] negative = {(byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF};
            assertRefused(BinaryBody.of(oneInput(bytesInput.formatted(1, negative.length)), negative),
                    "Input 's' binary BYTES element 0 declares 4294967295 bytes, more than its data holds.");
        }

        @Test
        void badHeaderLength() {
            byte[] json = utf8("{\"inputs\":[]}");
            assertThatThrownBy(() -> decoder.decode(json, json.length + 1, LIMITS))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("Inference-Header-Content-Length (14) is larger than the request body (13 bytes).");
            assertThatThrownBy(() -> decoder.decode(json, -1, LIMITS))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("Inference-Header-Content-Length is negative (-1).");
            // A header length cutting the JSON short leaves an unterminated object.
            assertThatThrownBy(() -> decoder.decode(json, json.length - 1, LIMITS))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessageStartingWith("The request is not valid JSON");
        }

        @Test
        void outputsThatCannotBeHonoured() {
            assertRefused("{\"inputs\":[],\"outputs\":{}}", "The request's 'outputs' must be an array.");
            assertRefused("{\"inputs\":[],\"outputs\":[\"y\"]}", "Requested output #0 must be a JSON object.");
            assertRefused("{\"inputs\":[],\"outputs\":[{\"parameters\":{}}]}", "Requested output #0 has no 'name'.");
            assertRefused("{\"inputs\":[],\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":1}}]}",
                    "Requested output 'y' parameter 'binary_data' must be a boolean.");
            assertRefused("{\"inputs\":[],\"outputs\":[{\"name\":\"y\",\"parameters\":{\"classification\":3}}]}",
                    "Requested output 'y' asks for classification, which this server does not support.");
            // A decoder without regions (a warm-up file's) refuses an input that names one.
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],"
                            + "\"parameters\":{\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":1}"),
                    "Input 'x' uses shared memory, which cannot be used here.");
        }

        @Test
        void nonUtf8Bodies() {
            byte[] utf16 = "{\"inputs\":[]}".getBytes(StandardCharsets.UTF_16LE);
            assertThatThrownBy(() -> decoder.decode(utf16, null, LIMITS))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessage("The request's JSON must be encoded as UTF-8.");
            byte[] badName = concat(utf8("{\"inputs\":[{\"name\":\""), new byte[] {(byte) 0xC3, 0x28},
                    utf8("\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[1]}]}"));
            assertThatThrownBy(() -> decoder.decode(badName, null, LIMITS))
                    .isInstanceOf(InvalidRequestException.class)
                    .hasMessageStartingWith("Input #0 is not valid JSON");
            assertThatThrownBy(() -> decoder.decode(new byte[] {(byte) 0xFF, (byte) 0xFE, (byte) 0xFD}, null, LIMITS))
                    .isInstanceOf(InvalidRequestException.class);
        }

        @Test
        void deepNestingEndsInAnErrorNotAStackOverflow() {
            String deepData = "[".repeat(33) + "1" + "]".repeat(33);
            assertRefused(oneInput("\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":" + deepData),
                    "Input 'x' 'data' nests arrays deeper than 32 levels.");
            String veryDeep = "[".repeat(100_000);
            assertRefusedContaining("{\"parameters\":{\"p\":1},\"future\":" + veryDeep + "}", "The request is not valid JSON",
                    "nesting depth");
            assertRefusedContaining(oneInput("\"data\":" + veryDeep), "Input #0 is not valid JSON", "nesting depth");
        }
    }

    /** Whatever the bytes, the decoder either succeeds or throws InvalidRequestException. */
    @Nested
    class Hostile {

        private final BinaryBody valid = BinaryBody.of("{\"id\":\"r\",\"parameters\":{\"binary_data_output\":false},"
                + "\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[2,2],\"data\":[[1.5,-2],[\"NaN\",4e3]]},"
                + "{\"shape\":[3],\"datatype\":\"BYTES\",\"data\":[\"x\",\"\",\"\\u00e9\"],\"name\":\"s\"},"
                + "{\"name\":\"b\",\"datatype\":\"UINT16\",\"shape\":[2],\"parameters\":{\"binary_data_size\":4}}],"
                + "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":true}}]}", new byte[] {1, 0, 2, 0});

        private void decodeSurvives(byte[] body, Integer headerLength) {
            try {
                decoder.decode(body, headerLength, LIMITS);
            } catch (InvalidRequestException expected) {
                assertThat(expected.getMessage()).isNotBlank();
            }
        }

        @Test
        void theValidBodyDecodes() {
            InferenceRequest r = decode(valid);

            assertThat(r.inputs()).extracting(Tensor::name).containsExactly("a", "s", "b");
            assertThat(bytesOf(r.inputs().get(2).data())).containsExactly(1, 0, 2, 0);
        }

        @Test
        void everyTruncation() {
            byte[] body = valid.body();
            for (int length = 0; length < body.length; length++) {
                byte[] prefix = Arrays.copyOf(body, length);
                decodeSurvives(prefix, valid.headerLength());
                decodeSurvives(prefix, Math.min(length, valid.headerLength()));
                decodeSurvives(prefix, null);
            }
        }

        @Test
        void everySingleByteCorruption() {
            byte[] replacements = {'{', '}', '[', ']', '"', ',', ':', '-', '0', '9', 'e', '\\', 0, (byte) 0x80, (byte) 0xFF};
            byte[] body = valid.body();
            for (int i = 0; i < body.length; i++) {
                for (byte r : replacements) {
                    byte[] corrupted = body.clone();
                    corrupted[i] = r;
                    decodeSurvives(corrupted, valid.headerLength());
                }
            }
        }

        @Test
        void randomGarbage() {
            Random random = new Random(20240601);
            for (int i = 0; i < 2_000; i++) {
                byte[] garbage = new byte[random.nextInt(64)];
                random.nextBytes(garbage);
                Integer header = random.nextBoolean() ? null : random.nextInt(80) - 8;
                decodeSurvives(garbage, header);
            }
        }

        @Test
        void inputTensorsAreIndependentOfTheBody() {
            byte[] body = valid.body().clone();
            InferenceRequest r = decoder.decode(body, valid.headerLength(), LIMITS);
            Arrays.fill(body, (byte) 0x55);

            assertThat(bytesOf(r.inputs().get(2).data())).containsExactly(1, 0, 2, 0);
            assertThat(r.inputs().get(2).data().order()).isEqualTo(ByteOrder.LITTLE_ENDIAN);
        }
    }
}
