package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.execution.CpuInstancePool;
import io.etserve.execution.ExecutionSlot;
import io.etserve.inference.DataType;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.modelconfig.Warmup;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WarmupTest {

    private static final Path DYNAMIC = TestPaths.testModels().resolve("dynamic-batch/1/model.pte");
    private static final List<TensorMetadata> INPUTS = List.of(new TensorMetadata("x", DataType.FP32, new long[] {-1, -1}));
    private static final long[][] BOUNDS = {{32, 16}};

    @Test
    void runsEveryInstanceAtTheUpperBoundAndReleasesTheSlots() throws InterruptedException {
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL)) {
            ProgramInstance a = p.newInstance("forward");
            ProgramInstance b = p.newInstance("forward");
            try (CpuInstancePool pool = new CpuInstancePool(List.of(a, b))) {
                WarmupCalls.run(new Warmup(3, Warmup.Data.RANDOM), pool, INPUTS, BOUNDS);
                WarmupCalls.run(new Warmup(1, Warmup.Data.ZEROS), pool, INPUTS, BOUNDS);
                // Every slot went back: both can be held again.
                try (ExecutionSlot one = pool.acquire(java.time.Duration.ofSeconds(1));
                        ExecutionSlot two = pool.acquire(java.time.Duration.ofSeconds(1))) {
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
            try (CpuInstancePool pool = new CpuInstancePool(List.of(a))) {
                assertThatThrownBy(() -> WarmupCalls.run(new Warmup(2, Warmup.Data.ZEROS), pool, wrong, new long[][] {{1, 16, 1}}))
                        .hasMessageContaining("warm-up call 1 of 2 failed").hasMessageContaining("rank");
            }
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
        Files.writeString(dir.resolve("too-big.json"),
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[33,16],\"data\":[]}]}");
        Files.writeString(dir.resolve("short.json"),
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3,16],\"data\":[1,2]}]}");
        var values = WarmupCalls.fromFile(dir.resolve("warmup.json"), INPUTS, BOUNDS);
        assertThat(values.get(0).shape()).containsExactly(3, 16);
        assertThat(values.get(0).data().order(java.nio.ByteOrder.LITTLE_ENDIAN).getFloat(47 * 4)).isEqualTo(0.5f);
        try (Program p = Program.load(DYNAMIC, Program.Verification.MINIMAL);
                CpuInstancePool pool = new CpuInstancePool(List.of(p.newInstance("forward")))) {
            WarmupCalls.run(new Warmup(2, Warmup.Data.FILE, "warmup.json"), pool, INPUTS, BOUNDS, dir);
            assertThatThrownBy(() -> WarmupCalls.run(new Warmup(1, Warmup.Data.FILE, "too-big.json"), pool, INPUTS, BOUNDS, dir))
                    .hasMessageContaining("too-big.json").hasMessageContaining("bound 32");
            assertThatThrownBy(() -> WarmupCalls.run(new Warmup(1, Warmup.Data.FILE, "short.json"), pool, INPUTS, BOUNDS, dir))
                    .hasMessageContaining("must hold 48 numbers");
            assertThatThrownBy(() -> WarmupCalls.run(new Warmup(1, Warmup.Data.FILE, "absent.json"), pool, INPUTS, BOUNDS, dir))
                    .hasMessageContaining("cannot read the warm-up file absent.json");
        }
        Files.writeString(dir.resolve("config.yml"), "warmup: { samples: 2, file: warmup.json }\n");
        assertThat(ModelConfig.read(dir).warmup()).isEqualTo(new Warmup(2, Warmup.Data.FILE, "warmup.json"));
        Files.writeString(dir.resolve("config.yml"), "warmup: { file: ../secrets.json }\n");
        assertThatThrownBy(() -> ModelConfig.read(dir)).hasMessageContaining("plain file name");
    }
}
