package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.execution.CpuInstancePool;
import io.etserve.execution.FaultListener;
import io.etserve.execution.ExecutionSlot;
import io.etserve.inference.DataType;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.modelconfig.Warmup;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.runtime.MethodSignature;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.support.TestPaths;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WarmupTest {

    private static final Path DYNAMIC = TestPaths.testModels().resolve("dynamic-batch/1/model.pte");
    private static final List<TensorMetadata> INPUTS = List.of(new TensorMetadata("x", DataType.FP32, new long[] {-1, -1}));
    private static final WarmupCalls.RequestDecoder DECODER =
            body -> new InferRequestDecoder().decode(body, null, new DecodeLimits(1 << 20, 8));

    /** The dynamic-batch program's method as its loader describes it: x of [1..32, 1..16]. */
    private static ModelDescription described(ProgramInstance instance, List<TensorMetadata> inputs) {
        MethodSignature signature = instance.signature();
        assertThat(signature.inputs().get(0).sizes()).containsExactly(32, 16);
        return new ModelDescription("dynamic", "1", signature, inputs, List.of());
    }

    @Test
    void runsEveryInstanceAtTheUpperBoundAndReleasesTheSlots() throws InterruptedException {
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL)) {
            ProgramInstance a = p.newInstance("forward");
            ProgramInstance b = p.newInstance("forward");
            ModelDescription model = described(a, INPUTS);
            try (CpuInstancePool pool = new CpuInstancePool(List.of(a, b))) {
                WarmupCalls.run(new Warmup(3, Warmup.Data.RANDOM), pool, model, 1 << 20, null, DECODER, FaultListener.NONE);
                WarmupCalls.run(new Warmup(1, Warmup.Data.ZEROS), pool, model, 1 << 20, null, DECODER, FaultListener.NONE);
                // Every slot went back: both can be held again.
                try (ExecutionSlot one = pool.acquire(Duration.ofSeconds(1));
                        ExecutionSlot two = pool.acquire(Duration.ofSeconds(1))) {
                    assertThat(one.instance()).isNotSameAs(two.instance());
                }
            }
        }
    }

    @Test
    void aFailingCallFailsWithItsReason() {
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL)) {
            ProgramInstance a = p.newInstance("forward");
            // A shape the method cannot take (rank 3) makes ExecuTorch refuse the call.
            List<TensorMetadata> wrong = List.of(new TensorMetadata("x", DataType.FP32, new long[] {1, 16, 1}));
            ModelDescription model = described(a, wrong);
            List<String> heard = new java.util.ArrayList<>();
            // Told as a served call's failure is (a sticky CUDA fault would mark its device).
            FaultListener faults = (device, error) -> heard.add(device + ": " + error.getMessage());
            try (CpuInstancePool pool = new CpuInstancePool(List.of(a))) {
                assertThatThrownBy(() -> WarmupCalls.run(new Warmup(2, Warmup.Data.ZEROS), pool, model, 1 << 20, null, DECODER, faults))
                        .hasMessageContaining("warm-up call 1 of 2 failed").hasMessageContaining("rank");
            }
            assertThat(heard).singleElement().asString().startsWith("OptionalInt.empty: ").contains("rank");
        }
    }

    @Test
    void configAcceptsACountOrSamplesAndData(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("config.yml"), "warmup: 4\n");
        assertThat(ModelConfig.read(dir).warmup()).isEqualTo(new Warmup(4, Warmup.Data.ZEROS));
        Files.writeString(dir.resolve("config.yml"), "warmup: { samples: 2, data: random }\n");
        assertThat(ModelConfig.read(dir).warmup()).isEqualTo(new Warmup(2, Warmup.Data.RANDOM));
        assertThat(ModelConfig.defaults().warmup().samples()).isZero();
        Files.writeString(dir.resolve("config.yml"), "warmup: { samples: 2, data: noise }\n");
        assertThatThrownBy(() -> ModelConfig.read(dir)).hasMessageContaining("'warmup'");
    }

    @Test
    void aFileGivesRepresentativeInputsCheckedAgainstTheMethod(@TempDir Path dir) throws Exception {
        String three = "[" + "0.5,".repeat(47) + "0.5]";
        Files.writeString(dir.resolve("warmup.json"),
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3,16],\"data\":" + three + "}]}");
        // 33 rows, each with its 16 numbers: well formed, but over the method's bound of 32.
        Files.writeString(dir.resolve("too-big.json"), "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                + "\"shape\":[33,16],\"data\":[" + "0,".repeat(33 * 16 - 1) + "0]}]}");
        Files.writeString(dir.resolve("short.json"),
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3,16],\"data\":[1,2]}]}");
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL)) {
            ProgramInstance instance = p.newInstance("forward");
            ModelDescription model = described(instance, INPUTS);
            CpuInstancePool pool = new CpuInstancePool(List.of(instance));
            var values = WarmupCalls.fromFile(dir.resolve("warmup.json"), model, 1 << 20, DECODER);
            assertThat(values.get(0).shape()).containsExactly(3, 16);
            assertThat(values.get(0).data().order(ByteOrder.LITTLE_ENDIAN).getFloat(47 * 4)).isEqualTo(0.5f);
            WarmupCalls.run(new Warmup(2, Warmup.Data.FILE, "warmup.json"), pool, model, 1 << 20, dir, DECODER, FaultListener.NONE);
            assertThatThrownBy(() -> WarmupCalls.run(new Warmup(1, Warmup.Data.FILE, "too-big.json"), pool, model, 1 << 20, dir, DECODER, FaultListener.NONE))
                    .hasMessageContaining("too-big.json").hasMessageContaining("bound 32");
            assertThatThrownBy(() -> WarmupCalls.run(new Warmup(1, Warmup.Data.FILE, "short.json"), pool, model, 1 << 20, dir, DECODER, FaultListener.NONE))
                    .hasMessageContaining("short.json").hasMessageContaining("needs 48");
            assertThatThrownBy(() -> WarmupCalls.run(new Warmup(1, Warmup.Data.FILE, "absent.json"), pool, model, 1 << 20, dir, DECODER, FaultListener.NONE))
                    .hasMessageContaining("cannot read the warm-up file absent.json");
            pool.close();
        }
        Files.writeString(dir.resolve("config.yml"), "warmup: { samples: 2, file: warmup.json }\n");
        assertThat(ModelConfig.read(dir).warmup()).isEqualTo(new Warmup(2, Warmup.Data.FILE, "warmup.json"));
        Files.writeString(dir.resolve("config.yml"), "warmup: { file: ../secrets.json }\n");
        assertThatThrownBy(() -> ModelConfig.read(dir)).hasMessageContaining("plain file name");
    }

    @Test
    void aFileIsReadAsAClientsRequestWouldBe(@TempDir Path dir) throws Exception {
        String row = "[" + "0.25,".repeat(15) + "0.25]";
        Files.writeString(dir.resolve("twice.json"), "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],"
                + "\"data\":" + row + "},{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + row + "}]}");
        Files.writeString(dir.resolve("ints.json"),
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[1,2],\"data\":[1,2]}]}");
        Files.writeString(dir.resolve("nested.json"), "{\"id\":\"warm\",\"inputs\":[{\"name\":\"x\",\"shape\":[2,16],"
                + "\"datatype\":\"FP32\",\"data\":[" + row + "," + row + "]}]}");
        Files.writeString(dir.resolve("none.json"), "{\"inputs\":[]}");
        Files.writeString(dir.resolve("not-json.json"), "inputs: x");
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL)) {
            ProgramInstance instance = p.newInstance("forward");
            ModelDescription model = described(instance, INPUTS);
            instance.close();
            // The REST decoder's refusals, in its words.
            assertThatThrownBy(() -> WarmupCalls.fromFile(dir.resolve("twice.json"), model, 1 << 20, DECODER))
                    .hasMessage("warm-up file twice.json: Input 'x' appears more than once.");
            // Not JSON: where, without quoting the file (it may be a link to another one).
            assertThatThrownBy(() -> WarmupCalls.fromFile(dir.resolve("not-json.json"), model, 1 << 20, DECODER))
                    .hasMessage("warm-up file not-json.json is not valid JSON (line 1, column 1)");  // the bad token starts there
            // The contract's: the method's dtype, its inputs, the model's element limit.
            assertThatThrownBy(() -> WarmupCalls.fromFile(dir.resolve("ints.json"), model, 1 << 20, DECODER))
                    .hasMessage("warm-up file ints.json: input 'x' must be FP32, got INT32");
            assertThatThrownBy(() -> WarmupCalls.fromFile(dir.resolve("none.json"), model, 1 << 20, DECODER))
                    .hasMessage("warm-up file none.json: missing input 'x' (FP32 [-1, -1])");
            assertThatThrownBy(() -> WarmupCalls.fromFile(dir.resolve("nested.json"), model, 31, DECODER))
                    .hasMessage("warm-up file nested.json: input 'x' has 32 elements; the limit is 31");
            // Nested row-major data, as the protocol allows it.
            var values = WarmupCalls.fromFile(dir.resolve("nested.json"), model, 32, DECODER);
            assertThat(values.get(0).shape()).containsExactly(2, 16);
            assertThat(values.get(0).data().order(ByteOrder.LITTLE_ENDIAN).getFloat(31 * 4)).isEqualTo(0.25f);
        }
    }
}
