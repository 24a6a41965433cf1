package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.etserve.grpc.protocol.InferParameter;
import io.etserve.grpc.protocol.InferTensorContents;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.Tensor;
import io.etserve.protocol.DecodeLimits;
import io.etserve.runtime.BufferLease;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.protocol.InvalidRequestException;
import io.etserve.protocol.SharedMemoryInputs;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** ModelInfer inputs to tensors: typed contents and raw sections, and the checks shared with REST. */
class GrpcTensorsTest {

    private static final DecodeLimits LIMITS = new DecodeLimits(1000, 4);
    private final GrpcTensors tensors = new GrpcTensors(LIMITS, SharedMemoryInputs.NONE);
    private final DirectBufferPool pool = new DirectBufferPool(1 << 20);

    private InferenceRequest decode(ModelInferRequest request) {
        return tensors.decode(request, new BufferLease(pool));
    }

    private static ModelInferRequest.Builder request() {
        return ModelInferRequest.newBuilder().setModelName("m");
    }

    private static ModelInferRequest.InferInputTensor.Builder input(String name, String datatype, long... shape) {
        ModelInferRequest.InferInputTensor.Builder in = ModelInferRequest.InferInputTensor.newBuilder()
                .setName(name).setDatatype(datatype);
        for (long d : shape) {
            in.addShape(d);
        }
        return in;
    }

    private static ModelInferRequest.InferRequestedOutputTensor.Builder output(String name) {
        return ModelInferRequest.InferRequestedOutputTensor.newBuilder().setName(name);
    }

    private static InferParameter text(String value) {
        return InferParameter.newBuilder().setStringParam(value).build();
    }

    private static ModelInferRequest one(ModelInferRequest.InferInputTensor.Builder in) {
        return request().addInputs(in).build();
    }

    private static byte[] bytes(Tensor t) {
        ByteBuffer d = t.data();
        byte[] out = new byte[d.remaining()];
        d.get(out);
        return out;
    }

    private static ByteBuffer le(int capacity) {
        return ByteBuffer.allocate(capacity).order(ByteOrder.LITTLE_ENDIAN);
    }

    private void assertRefused(ModelInferRequest request, String message) {
        assertThatThrownBy(() -> decode(request)).isInstanceOf(InvalidRequestException.class).hasMessage(message);
    }

    @Test
    void inputsLiveInTheCallsLeaseAndGoBackToThePoolWhenItCloses() {
        ModelInferRequest request = request().addInputs(input("x", "FP32", 2))
                .addRawInputContents(ByteString.copyFrom(le(8).putFloat(1.5f).putFloat(-2f).array())).build();
        BufferLease lease = new BufferLease(pool);
        ByteBuffer first = tensors.decode(request, lease).inputs().get(0).data();
        assertThat(first.isDirect()).isTrue();
        assertThat(first.getFloat(4)).isEqualTo(-2f);
        assertThat(pool.retainedBytes()).isZero();

        lease.close();
        assertThat(pool.retainedBytes()).isEqualTo(first.capacity());
        assertThatThrownBy(() -> lease.acquire(8)).isInstanceOf(IllegalStateException.class);
        ByteBuffer second = tensors.decode(request, new BufferLease(pool)).inputs().get(0).data();
        assertThat(pool.retainedBytes()).as("the next call reuses the buffer").isZero();
        assertThat(second.getFloat(0)).isEqualTo(1.5f);
    }

    @Test
    void typedContentsBecomeLittleEndianElementsOfTheirType() {
        InferenceRequest r = decode(request()
                .addInputs(input("b", "BOOL", 3).setContents(InferTensorContents.newBuilder()
                        .addBoolContents(true).addBoolContents(false).addBoolContents(true)))
                .addInputs(input("i8", "INT8", 2).setContents(InferTensorContents.newBuilder()
                        .addIntContents(-128).addIntContents(127)))
                .addInputs(input("u16", "UINT16", 2).setContents(InferTensorContents.newBuilder()
                        .addUintContents(65535).addUintContents(1)))
                .addInputs(input("u64", "UINT64", 1).setContents(InferTensorContents.newBuilder()
                        .addUint64Contents(-1L)))
                .build());

        assertThat(bytes(r.inputs().get(0))).containsExactly(1, 0, 1);
        assertThat(bytes(r.inputs().get(1))).containsExactly(0x80, 0x7F);
        assertThat(bytes(r.inputs().get(2))).containsExactly(0xFF, 0xFF, 0x01, 0x00);
        // uint64 carries the full unsigned range: 2^64 - 1.
        assertThat(bytes(r.inputs().get(3))).containsExactly(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF);

        InferenceRequest wide = decode(request()
                .addInputs(input("i32", "INT32", 1).setContents(InferTensorContents.newBuilder().addIntContents(-2)))
                .addInputs(input("i64", "INT64", 1).setContents(InferTensorContents.newBuilder()
                        .addInt64Contents(Long.MIN_VALUE)))
                .addInputs(input("f32", "FP32", 2).setContents(InferTensorContents.newBuilder()
                        .addFp32Contents(1.5f).addFp32Contents(Float.NaN)))
                .addInputs(input("f64", "FP64", 1).setContents(InferTensorContents.newBuilder().addFp64Contents(-0.25)))
                .build());
        assertThat(bytes(wide.inputs().get(0))).containsExactly(le(4).putInt(-2).array());
        assertThat(bytes(wide.inputs().get(1))).containsExactly(le(8).putLong(Long.MIN_VALUE).array());
        assertThat(bytes(wide.inputs().get(2))).containsExactly(le(8).putFloat(1.5f).putFloat(Float.NaN).array());
        assertThat(bytes(wide.inputs().get(3))).containsExactly(le(8).putDouble(-0.25).array());
        assertThat(wide.inputs().get(3).dataType()).isEqualTo(DataType.FP64);
        assertThat(wide.inputs().get(2).data().isDirect()).as("the bridge reads inputs in place").isTrue();
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource(delimiter = '|', textBlock = """
            INT8   | 128     | element 0 (128) is out of range for INT8.
            INT8   | -129    | element 0 (-129) is out of range for INT8.
            INT16  | 32768   | element 0 (32768) is out of range for INT16.
            UINT8  | 256     | element 0 (256) is out of range for UINT8.
            UINT16 | 65536   | element 0 (65536) is out of range for UINT16.
            """)
    void narrowerIntegersAreRangeChecked(String type, long value, String message) {
        InferTensorContents.Builder c = InferTensorContents.newBuilder();
        if (type.startsWith("U")) {
            c.addUintContents((int) value);
        } else {
            c.addIntContents((int) value);
        }
        assertRefused(one(input("v", type, 1).setContents(c)), "Input 'v' " + message);
    }

    @Test
    void contentsMustHoldOneValuePerElementInTheirTypesField() {
        assertRefused(one(input("x", "FP32", 1, 3).setContents(InferTensorContents.newBuilder()
                        .addFp32Contents(1).addFp32Contents(2))),
                "Input 'x' has 2 values in fp32_contents but its shape [1, 3] needs 3.");
        // INT64 travels in int64_contents, not in int_contents.
        assertRefused(one(input("x", "INT64", 1).setContents(InferTensorContents.newBuilder().addIntContents(1))),
                "Input 'x' is INT64, whose values travel in int64_contents; it has values in other contents fields too.");
        // Values beside the right field's are refused, not ignored.
        assertRefused(one(input("x", "FP32", 1).setContents(InferTensorContents.newBuilder().addFp32Contents(1)
                        .addInt64Contents(7))),
                "Input 'x' is FP32, whose values travel in fp32_contents; it has values in other contents fields too.");
        assertRefused(one(input("s", "BYTES", 1).setContents(InferTensorContents.newBuilder()
                        .addBytesContents(ByteString.copyFromUtf8("a")).addBoolContents(true))),
                "Input 's' is BYTES, whose values travel in bytes_contents; it has values in other contents fields too.");
        assertRefused(one(input("h", "FP16", 1).setContents(InferTensorContents.newBuilder().addFp32Contents(1))),
                "Input 'h' is FP16, which travels only in raw_input_contents.");
    }

    @Test
    void rawSectionsMustFitTheShape() {
        InferenceRequest r = decode(request().addInputs(input("h", "FP16", 2))
                .addRawInputContents(ByteString.copyFrom(new byte[] {0, 0x3C, 0, (byte) 0xC0})).build());
        assertThat(bytes(r.inputs().get(0))).containsExactly(0, 0x3C, 0, 0xC0);

        assertRefused(request().addInputs(input("x", "FP32", 1, 16)).addRawInputContents(ByteString.copyFrom(new byte[60]))
                .build(), "Input 'x' has 60 bytes of raw contents, but 16 FP32 elements (shape [1, 16]) need 64 bytes.");
        assertRefused(request().addInputs(input("x", "FP32", 1)).addRawInputContents(ByteString.copyFrom(new byte[3]))
                .build(), "Input 'x' has 3 bytes of raw contents, but 1 FP32 element (shape [1]) needs 4 bytes.");
        assertRefused(request().addInputs(input("b", "BOOL", 2)).addRawInputContents(ByteString.copyFrom(new byte[] {0, 2}))
                .build(), "Input 'b' BOOL element 1 is byte 2; a BOOL element is the byte 0 or 1.");
        assertRefused(request().addInputs(input("a", "FP32", 1)).addInputs(input("b", "FP32", 1))
                        .addRawInputContents(ByteString.copyFrom(new byte[4])).build(),
                "raw_input_contents has 1 entries for 2 inputs; give one per input, in order.");
        assertRefused(request().addInputs(input("a", "FP32", 1).setContents(InferTensorContents.newBuilder()
                        .addFp32Contents(1))).addRawInputContents(ByteString.copyFrom(new byte[4])).build(),
                "Input 'a' has contents, but the request uses raw_input_contents; use one or the other.");
    }

    @Test
    void bytesElementsAreLengthPrefixedFromRawOrContents() {
        byte[] expected = le(4 + 2 + 4).putInt(2).put("ab".getBytes(StandardCharsets.UTF_8)).putInt(0).array();
        InferenceRequest contents = decode(one(input("s", "BYTES", 2).setContents(InferTensorContents.newBuilder()
                .addBytesContents(ByteString.copyFromUtf8("ab")).addBytesContents(ByteString.EMPTY))));
        InferenceRequest raw = decode(request().addInputs(input("s", "BYTES", 2))
                .addRawInputContents(ByteString.copyFrom(expected)).build());

        assertThat(bytes(contents.inputs().get(0))).containsExactly(expected);
        assertThat(bytes(raw.inputs().get(0))).containsExactly(expected);
        assertRefused(request().addInputs(input("s", "BYTES", 3)).addRawInputContents(ByteString.copyFrom(expected))
                .build(), "Input 's' binary BYTES data ends before element 2 of 3.");
    }

    @Test
    void sizesAreCheckedBeforeAnythingIsAllocated() {
        // 2^40 elements of FP64 would be 8 TB: refused from the shape alone.
        assertRefused(one(input("x", "FP64", 1L << 20, 1L << 20)),
                "Input 'x' has 1099511627776 elements, more than the limit of 1000 per tensor.");
        assertRefused(one(input("x", "FP32", 1L << 40, 1L << 40)),
                "Input 'x' has shape [1099511627776, 1099511627776], whose element count overflows 64 bits.");
        ModelInferRequest.Builder five = request();
        for (int i = 0; i < 5; i++) {
            five.addInputs(input("x" + i, "INT8", 1).setContents(InferTensorContents.newBuilder().addIntContents(0)));
        }
        assertRefused(five.build(), "The request has more than 4 inputs, the most allowed.");
    }

    /** The checks both decoders make answer a gRPC client in REST's words. */
    @Test
    void sharedChecksSpeakAsRestDoes() {
        InferRequestDecoder rest = new InferRequestDecoder();
        String[][] cases = {
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[1]},"
                    + "{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],\"data\":[1]}]}",
                "Input 'x' appears more than once."},
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP33\",\"shape\":[1],\"data\":[1]}]}",
                "Input 'x' has unknown datatype 'FP33'."},
            // A client's text is quoted with its control characters escaped, so it cannot forge log lines.
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\\n\\u0000\",\"shape\":[1],\"data\":[1]}]}",
                "Input 'x' has unknown datatype 'FP32\\u000A\\u0000'."},
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[2,-1],\"data\":[1]}]}",
                "Input 'x' has negative dimension -1 in its shape."},
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1001],\"data\":[1]}]}",
                "Input 'x' has 1001 elements, more than the limit of 1000 per tensor."},
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[" + "1,".repeat(32) + "1],\"data\":[1]}]}",
                "Input 'x' has more than 32 dimensions."},
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],"
                    + "\"parameters\":{\"shared_memory_region\":\"r\"}}]}",
                "Input 'x' has shared_memory_region but no shared_memory_byte_size."},
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],"
                    + "\"parameters\":{\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":-1}}]}",
                "Input 'x' parameter 'shared_memory_byte_size' must be a whole number of bytes, 0 to 2^63 - 1."},
            {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],"
                    + "\"parameters\":{\"shared_memory_offset\":0}}]}",
                "Input 'x' has shared_memory_offset but no shared_memory_region."},
            {"{\"inputs\":[],\"outputs\":[{\"name\":\"y\",\"parameters\":{\"classification\":3}}]}",
                "Requested output 'y' asks for classification, which this server does not support."},
            {"{\"inputs\":[],\"outputs\":[{\"name\":\"y\",\"parameters\":{\"shared_memory_region\":\"r\"}}]}",
                "Requested output 'y' has shared_memory_region but no shared_memory_byte_size."},
            {"{\"inputs\":[],\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}]}",
                "Requested output 'y' is requested more than once."},
            {"{\"inputs\":[],\"outputs\":[{\"name\":\"y\"},{\"parameters\":{}}]}",
                "Requested output #1 has no 'name'."},
        };
        long[] rank33 = new long[33];
        java.util.Arrays.fill(rank33, 1);
        ModelInferRequest[] grpc = {
            request().addInputs(input("x", "INT8", 1).setContents(InferTensorContents.newBuilder().addIntContents(1)))
                    .addInputs(input("x", "INT8", 1).setContents(InferTensorContents.newBuilder().addIntContents(1)))
                    .build(),
            one(input("x", "FP33", 1)),
            one(input("x", "FP32\n\u0000", 1)),
            one(input("x", "INT8", 2, -1)),
            one(input("x", "INT8", 1001)),
            one(input("x", "INT8", rank33)),
            one(input("x", "INT8", 1).putParameters("shared_memory_region", text("r"))),
            one(input("x", "INT8", 1).putParameters("shared_memory_region", text("r"))
                    .putParameters("shared_memory_byte_size", InferParameter.newBuilder().setInt64Param(-1).build())),
            one(input("x", "INT8", 1).putParameters("shared_memory_offset",
                    InferParameter.newBuilder().setInt64Param(0).build())),
            request().addOutputs(output("y").putParameters("classification", InferParameter.newBuilder().setInt64Param(3).build()))
                    .build(),
            request().addOutputs(output("y").putParameters("shared_memory_region", text("r"))).build(),
            request().addOutputs(output("y")).addOutputs(output("y")).build(),
            request().addOutputs(output("y")).addOutputs(ModelInferRequest.InferRequestedOutputTensor.newBuilder()).build(),
        };
        for (int i = 0; i < cases.length; i++) {
            byte[] json = cases[i][0].getBytes(StandardCharsets.UTF_8);
            assertThatThrownBy(() -> rest.decode(json, null, LIMITS)).as("REST").hasMessage(cases[i][1]);
            assertRefused(grpc[i], cases[i][1]);
        }
    }
}
