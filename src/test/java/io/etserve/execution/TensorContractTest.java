package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.Tensor;
import io.etserve.inference.TensorMetadata;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.MethodSignature;
import io.etserve.runtime.TensorSpec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The one place a request meets a method: a method {@code (x: FP32 [1..4, 3], ids: INT64 [2])},
 * with x's first dimension dynamic up to 4, as a loader would describe it.
 */
class TensorContractTest {

    private static final ModelDescription MODEL = new ModelDescription("m", "1",
            new MethodSignature("forward",
                    List.of(new TensorSpec(true, DataType.FP32.executorchCode(), new long[] {4, 3}, true),
                            new TensorSpec(true, DataType.INT64.executorchCode(), new long[] {2})),
                    List.of(new TensorSpec(true, DataType.FP32.executorchCode(), new long[] {4, 3}, true)),
                    List.of(), List.of()),
            List.of(new TensorMetadata("x", DataType.FP32, new long[] {-1, 3}),
                    new TensorMetadata("ids", DataType.INT64, new long[] {2})),
            List.of(new TensorMetadata("y", DataType.FP32, new long[] {-1, 3})));
    private static final long LIMIT = 9;

    private static Tensor tensor(String name, DataType type, long... shape) {
        long n = Tensor.elementCount(shape);
        return new Tensor(name, type, shape, ByteBuffer.allocateDirect((int) n * type.byteSize()));
    }

    private static List<ExecutionInput> bind(Tensor... inputs) {
        return TensorContract.bindInputs(MODEL, LIMIT, new InferenceRequest(null, Map.of(), List.of(inputs), null, false));
    }

    private static void assertRefused(String message, Tensor... inputs) {
        assertThatThrownBy(() -> bind(inputs)).isInstanceOf(InvalidInputException.class).hasMessage(message);
    }

    @Test
    void bindsInputsByNameInTheMethodsOrder() {
        ByteBuffer heap = ByteBuffer.allocate(2 * Long.BYTES).order(ByteOrder.LITTLE_ENDIAN).putLong(7).putLong(-8).flip();
        List<ExecutionInput> bound = bind(new Tensor("ids", DataType.INT64, new long[] {2}, heap),
                tensor("x", DataType.FP32, 3, 3));

        assertThat(bound).hasSize(2);
        assertThat(bound.get(0).shape()).containsExactly(3, 3);
        assertThat(bound.get(0).scalarType()).isEqualTo(6);  // ExecuTorch's Float
        assertThat(bound.get(1).scalarType()).isEqualTo(4);  // ExecuTorch's Long
        // A heap buffer is copied once into direct memory, which the bridge reads in place.
        ByteBuffer ids = bound.get(1).data().order(ByteOrder.LITTLE_ENDIAN);
        assertThat(ids.isDirect()).isTrue();
        assertThat(ids.getLong(0)).isEqualTo(7);
        assertThat(ids.getLong(8)).isEqualTo(-8);
    }

    @Test
    void namesMustBeTheMethods() {
        assertRefused("model 'm' has no input 'z'; its inputs are [x, ids]",
                tensor("x", DataType.FP32, 1, 3), tensor("ids", DataType.INT64, 2), tensor("z", DataType.FP32, 1));
        assertRefused("missing input 'ids' (INT64 [2])", tensor("x", DataType.FP32, 1, 3));
    }

    @Test
    void dtypeMustBeTheMethods() {
        assertRefused("input 'ids' must be INT64, got INT32",
                tensor("x", DataType.FP32, 1, 3), tensor("ids", DataType.INT32, 2));
        // No ExecuTorch method takes strings: BYTES, which the decoders accept, stops here.
        assertRefused("input 'x' must be FP32, got BYTES",
                new Tensor("x", DataType.BYTES, new long[] {1, 3}, ByteBuffer.allocateDirect(12)),
                tensor("ids", DataType.INT64, 2));
    }

    @Test
    void shapeMustFitStaticSizesAndDynamicBounds() {
        Tensor ids = tensor("ids", DataType.INT64, 2);
        assertRefused("input 'x' must have shape [-1, 3], got [3]", tensor("x", DataType.FP32, 3), ids);
        assertRefused("input 'x' dimension 1 must be 3 (static), got 2 in [1, 2]", tensor("x", DataType.FP32, 1, 2), ids);
        assertRefused("input 'x' dimension 0 is 5; it may vary from 1 to its bound 4", tensor("x", DataType.FP32, 5, 3), ids);
        assertRefused("input 'x' dimension 0 is 0; it may vary from 1 to its bound 4", tensor("x", DataType.FP32, 0, 3), ids);
        assertRefused("input 'ids' dimension 0 must be 2 (static), got 3 in [3]", tensor("x", DataType.FP32, 1, 3),
                tensor("ids", DataType.INT64, 3));
    }

    @Test
    void elementCountMustKeepTheModelsLimit() {
        // 4 x 3 = 12 fits the bound, but not this model's limit of 9 elements per tensor.
        assertRefused("input 'x' has 12 elements; the limit is 9", tensor("x", DataType.FP32, 4, 3),
                tensor("ids", DataType.INT64, 2));
        assertThat(bind(tensor("x", DataType.FP32, 3, 3), tensor("ids", DataType.INT64, 2))).hasSize(2);
    }

    @Test
    void aRepeatedNameIsACallersBugNotAClientsError() {
        // The decoders refuse it with a 400 before a request exists; code that builds one anyway
        // gets an IllegalArgumentException (a 500), not a silently dropped input.
        assertThatThrownBy(() -> bind(tensor("x", DataType.FP32, 1, 3), tensor("x", DataType.FP32, 1, 3),
                tensor("ids", DataType.INT64, 2))).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'x'");
    }

    @Test
    void outputsAskedForMustExistAndBeAskedOnce() {
        assertThatThrownBy(() -> select(new InferenceRequest.RequestedOutput("nope", null)))
                .isInstanceOf(InvalidInputException.class).hasMessage("model 'm' has no output 'nope'; its outputs are [y]");
        assertThatThrownBy(() -> select(new InferenceRequest.RequestedOutput("y", null),
                new InferenceRequest.RequestedOutput("y", true)))
                .isInstanceOf(InvalidInputException.class).hasMessage("output 'y' requested twice");
        assertThat(select(new InferenceRequest.RequestedOutput("y", true)).binary()).containsExactly("y");
    }

    private static TensorContract.OutputSelection select(InferenceRequest.RequestedOutput... outputs) {
        return TensorContract.selectOutputs(MODEL, new InferenceRequest(null, Map.of(), List.of(), List.of(outputs), false));
    }
}
