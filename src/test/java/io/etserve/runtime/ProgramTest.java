package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Java face of the bridge on the real ExecuTorch runtime. */
class ProgramTest {

    private static final int FLOAT = 6;
    private static final Path DEMO = TestPaths.demoModels().resolve("demo-portable/1/model.pte");
    private static final Path DEMO_XNNPACK = TestPaths.demoModels().resolve("demo-xnnpack/1/model.pte");

    static ByteBuffer direct(List<Double> values) {
        ByteBuffer b = ByteBuffer.allocateDirect(values.size() * 4).order(ByteOrder.LITTLE_ENDIAN);
        values.forEach(v -> b.putFloat(v.floatValue()));
        return b.flip();
    }

    static float[] floats(byte[] data) {
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        float[] f = new float[data.length / 4];
        for (int i = 0; i < f.length; i++) {
            f[i] = b.getFloat();
        }
        return f;
    }

    @Test
    void listsMethodsAndSignature() {
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY)) {
            assertThat(p.methodNames()).containsExactly("forward");
            MethodSignature s = p.signature("forward");
            assertThat(s.inputs()).containsExactly(new TensorSpec(true, FLOAT, new long[] {1, 16}));
            assertThat(s.outputs()).containsExactly(new TensorSpec(true, FLOAT, new long[] {1, 4}));
            assertThat(s.backends()).isEmpty();
        }
        try (Program p = Program.load(DEMO_XNNPACK, Program.Verification.INTERNAL_CONSISTENCY)) {
            assertThat(p.signature("forward").backends()).contains("XnnpackBackend");
        }
    }

    @Test
    void bothVariantsMatchThePyTorchReference() {
        for (Path model : List.of(DEMO, DEMO_XNNPACK)) {
            Reference ref = Reference.load(model.resolveSibling("reference.json"));
            try (Program p = Program.load(model, Program.Verification.INTERNAL_CONSISTENCY);
                    ProgramInstance instance = p.newInstance("forward")) {
                for (Reference.Case c : ref.cases()) {
                    Reference.TensorValue in = c.inputs().get(0);
                    List<ExecutionOutput> outs = instance.execute(
                            List.of(new ExecutionInput(direct(in.data()), FLOAT, in.shape())), StreamSelection.none());
                    Reference.TensorValue expected = c.outputs().get(0);
                    assertThat(outs.get(0).shape()).containsExactly(expected.shape());
                    float[] got = floats(outs.get(0).toArray());
                    for (int i = 0; i < got.length; i++) {
                        assertThat(ref.close(got[i], expected.data().get(i)))
                                .as("%s element %d: %s vs %s", model, i, got[i], expected.data().get(i)).isTrue();
                    }
                }
            }
        }
    }

    @Test
    void outputsAreCopiesNotViewsOfModuleMemory() {
        // The first call's output must keep its bytes after a second call reuses the Module's
        // memory: read the output itself (its buffer) again, not a copy taken before.
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance instance = p.newInstance("forward")) {
            List<Double> a = new ArrayList<>(java.util.Collections.nCopies(16, 0.25));
            List<Double> b = new ArrayList<>(java.util.Collections.nCopies(16, -0.75));
            ExecutionOutput first = instance.execute(List.of(new ExecutionInput(direct(a), FLOAT, new long[] {1, 16})),
                    StreamSelection.none()).get(0);
            byte[] snapshot = first.toArray();
            ExecutionOutput second = instance.execute(List.of(new ExecutionInput(direct(b), FLOAT, new long[] {1, 16})),
                    StreamSelection.none()).get(0);
            assertThat(second.toArray()).as("the inputs differ, so must the outputs").isNotEqualTo(snapshot);
            assertThat(first.toArray()).isEqualTo(snapshot);
        }
    }

    @Test
    void pathsAndMessagesKeepCharactersOutsideTheBasicPlane(@TempDir Path dir) throws IOException {
        // A directory named with an emoji (two UTF-16 units, four UTF-8 bytes) holds the program.
        Path home = Files.createDirectory(dir.resolve("models-\uD83D\uDE80-\u00e9"));
        Path program = Files.copy(DEMO, home.resolve("model.pte"));
        try (Program p = Program.load(program, Program.Verification.INTERNAL_CONSISTENCY)) {
            assertThat(p.methodNames()).containsExactly("forward");
        }
        // The native message names the path as it was given.
        Path missing = home.resolve("\uD83D\uDE80.pte");
        assertThatThrownBy(() -> Program.load(missing, Program.Verification.INTERNAL_CONSISTENCY))
                .isInstanceOfSatisfying(ExecuTorchException.class, e -> assertThat(e.errorName()).isEqualTo("NotFound"))
                .hasMessageContaining(missing.getFileName().toString());
    }

    @Test
    void aFileThatIsNotAProgramIsRefusedWithoutQuotingItsBytes(@TempDir Path dir) throws IOException {
        // A model.pte linked to some other file: the refusal must not show a piece of it.
        Path other = Files.writeString(dir.resolve("other.txt"), "root:SECRET:0:0:" + "x".repeat(200));
        assertThatThrownBy(() -> Program.load(other, Program.Verification.INTERNAL_CONSISTENCY))
                .isInstanceOf(ExecuTorchException.class).hasMessageContaining("not shown")
                .hasMessageNotContaining("SECR").hasMessageNotContaining(":SEC").hasMessageNotContaining("t:SE");
    }

    @Test
    void badFilesFailWithTheirErrorName(@TempDir Path dir) throws IOException {
        byte[] good = Files.readAllBytes(DEMO);
        Path empty = Files.write(dir.resolve("empty.pte"), new byte[0]);
        Path truncated = Files.write(dir.resolve("truncated.pte"), Arrays.copyOf(good, good.length / 3));
        Path text = Files.writeString(dir.resolve("notes.pte"), "not an ExecuTorch program\n".repeat(100));
        byte[] corrupt = good.clone();
        for (int i = 64; i < Math.min(corrupt.length, 4096); i += 5) {
            corrupt[i] = (byte) 0xA5;
        }
        Path scribbled = Files.write(dir.resolve("corrupt.pte"), corrupt);

        assertThatThrownBy(() -> Program.load(empty, Program.Verification.INTERNAL_CONSISTENCY))
                .isInstanceOfSatisfying(ExecuTorchException.class, e -> assertThat(e.errorName()).isEqualTo("InvalidProgram"));
        assertThatThrownBy(() -> Program.load(dir.resolve("missing.pte"), Program.Verification.INTERNAL_CONSISTENCY))
                .isInstanceOfSatisfying(ExecuTorchException.class, e -> assertThat(e.errorName()).isEqualTo("NotFound"));
        assertThatThrownBy(() -> Program.load(dir, Program.Verification.INTERNAL_CONSISTENCY))
                .isInstanceOfSatisfying(ExecuTorchException.class, e -> assertThat(e.errorName()).isEqualTo("InvalidArgument"));
        for (Path bad : List.of(truncated, text, scribbled)) {
            assertThatThrownBy(() -> {
                try (Program p = Program.load(bad, Program.Verification.INTERNAL_CONSISTENCY)) {
                    p.newInstance("forward").close();
                }
            }).as(bad.toString()).isInstanceOf(ExecuTorchException.class).hasMessageContaining("(");
        }
        // The runtime is still fine afterwards.
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY)) {
            assertThat(p.methodNames()).containsExactly("forward");
        }
    }

    @Test
    void badInputsAreRefusedWithoutHarm() {
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance instance = p.newInstance("forward")) {
            ByteBuffer ok = direct(java.util.Collections.nCopies(16, 0.5));
            assertThatThrownBy(() -> instance.execute(List.of(), StreamSelection.none()))
                    .isInstanceOfSatisfying(ExecuTorchException.class, e -> assertThat(e.isInvalidInput()).isTrue());
            assertThatThrownBy(() -> instance.execute(List.of(new ExecutionInput(ok, 4, new long[] {1, 16})),
                    StreamSelection.none())).isInstanceOf(ExecuTorchException.class).hasMessageContaining("dtype");
            assertThatThrownBy(() -> instance.execute(List.of(new ExecutionInput(ok, FLOAT, new long[] {1, 32})),
                    StreamSelection.none())).isInstanceOf(ExecuTorchException.class);
            assertThatThrownBy(() -> instance.execute(List.of(new ExecutionInput(ok, FLOAT, new long[] {1L << 40, 1L << 40})),
                    StreamSelection.none())).isInstanceOf(ExecuTorchException.class);
            assertThat(instance.execute(List.of(new ExecutionInput(ok, FLOAT, new long[] {1, 16})), StreamSelection.none()))
                    .hasSize(1);
        }
    }

    @Test
    void theStreamOptionsReachTheBridgeAndACpuInstanceCountsNoWaits() {
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance instance = p.newInstance("forward")) {
            List<ExecutionInput> in = List.of(new ExecutionInput(direct(java.util.Collections.nCopies(16, 0.5)),
                    FLOAT, new long[] {1, 16}));
            // No host has a CUDA device 999: the device made current comes from the call's options.
            assertThatThrownBy(() -> instance.execute(in, StreamSelection.cuda(1, 999)))
                    .isInstanceOf(ExecuTorchException.class).hasMessageContaining("cudaSetDevice(999)");
            assertThat(instance.lastAdaptiveWait()).isEqualTo(CompletionWaits.Ended.NONE);
            assertThat(instance.execute(in, StreamSelection.none())).hasSize(1);
            assertThat(instance.lastAdaptiveWait()).isEqualTo(CompletionWaits.Ended.NONE);
            assertThat(instance.stats()).isEqualTo(new CompletionWaits(0, 0, 0, 0, 0));
        }
    }

    @Test
    void unknownMethodAndClosedHandlesFailCleanly() {
        Program p = Program.load(DEMO, Program.Verification.MINIMAL);
        assertThatThrownBy(() -> p.newInstance("nope")).isInstanceOf(ExecuTorchException.class)
                .hasMessageContaining("nope");
        // A C string would end at the NUL and name "forward": refused instead.
        assertThatThrownBy(() -> p.newInstance("forward\u0000x")).isInstanceOfSatisfying(ExecuTorchException.class,
                e -> assertThat(e.errorName()).isEqualTo("InvalidArgument"));
        ProgramInstance instance = p.newInstance("forward");
        p.close();
        // The instance keeps the shared program alive until it is closed itself.
        ByteBuffer ok = direct(java.util.Collections.nCopies(16, 0.5));
        assertThat(instance.execute(List.of(new ExecutionInput(ok, FLOAT, new long[] {1, 16})), StreamSelection.none()))
                .hasSize(1);
        instance.close();
        assertThatThrownBy(() -> instance.execute(List.of(), StreamSelection.none()))
                .isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(p::methodNames).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void oneInstancePerThreadOverASharedProgramGivesCorrectResults() throws Exception {
        Reference ref = Reference.load(DEMO.resolveSibling("reference.json"));
        int threads = 4;
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY)) {
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            CountDownLatch start = new CountDownLatch(1);
            List<Future<Integer>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                results.add(pool.submit(() -> {
                    int checked = 0;
                    try (ProgramInstance instance = p.newInstance("forward")) {
                        start.await();
                        for (int round = 0; round < 200; round++) {
                            Reference.Case c = ref.cases().get(round % ref.cases().size());
                            Reference.TensorValue in = c.inputs().get(0);
                            float[] got = floats(instance.execute(
                                    List.of(new ExecutionInput(direct(in.data()), FLOAT, in.shape())),
                                    StreamSelection.none()).get(0).toArray());
                            for (int i = 0; i < got.length; i++) {
                                if (!ref.close(got[i], c.outputs().get(0).data().get(i))) {
                                    throw new AssertionError("wrong output under concurrency");
                                }
                            }
                            checked++;
                        }
                    }
                    return checked;
                }));
            }
            start.countDown();
            for (Future<Integer> f : results) {
                assertThat(f.get(60, TimeUnit.SECONDS)).isEqualTo(200);
            }
            pool.shutdown();
        }
    }

    @Test
    void anInstanceRefusesACallOrACloseFromInsideItsOwnCall() {
        // The bridge asks the output buffers for memory during the call, on the caller's thread:
        // running or freeing the instance from there must be refused, not take the (reentrant) lock.
        Reference ref = Reference.load(DEMO.resolveSibling("reference.json"));
        Reference.TensorValue in = ref.cases().get(0).inputs().get(0);
        Reference.TensorValue expected = ref.cases().get(0).outputs().get(0);
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance instance = p.newInstance("forward")) {
            List<Throwable> inside = new ArrayList<>();
            OutputBuffers reentering = (output, bytes) -> {
                try {
                    instance.execute(List.of(new ExecutionInput(direct(in.data()), FLOAT, in.shape())),
                            StreamSelection.none());
                } catch (RuntimeException e) {
                    inside.add(e);
                }
                try {
                    instance.close();
                } catch (RuntimeException e) {
                    inside.add(e);
                }
                return OutputBuffers.ALLOCATE.allocate(output, bytes);
            };
            float[] got = floats(instance.execute(List.of(new ExecutionInput(direct(in.data()), FLOAT, in.shape())),
                    StreamSelection.none(), reentering).get(0).toArray());
            assertThat(inside).hasSize(2).allSatisfy(e -> assertThat(e).isInstanceOf(IllegalStateException.class));
            for (int i = 0; i < got.length; i++) {
                assertThat(ref.close(got[i], expected.data().get(i))).as("element %d: %s", i, got[i]).isTrue();
            }
            // Still open and whole: it runs again.
            assertThat(instance.execute(List.of(new ExecutionInput(direct(in.data()), FLOAT, in.shape())),
                    StreamSelection.none())).hasSize(1);
        }
    }

    @Test
    void anInstanceRefusesASecondConcurrentCaller() throws Exception {
        // ProgramInstance guards the Module: a second thread gets an exception, never shared
        // memory. One thread calls on and on; this one calls until it is refused at least once
        // (it must be, while the other is inside a call), and every call that ran, on either
        // thread, answers PyTorch's reference.
        Reference ref = Reference.load(DEMO.resolveSibling("reference.json"));
        Reference.TensorValue in = ref.cases().get(0).inputs().get(0);
        Reference.TensorValue expected = ref.cases().get(0).outputs().get(0);
        try (Program p = Program.load(DEMO, Program.Verification.INTERNAL_CONSISTENCY);
                ProgramInstance instance = p.newInstance("forward")) {
            java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            java.util.function.Supplier<Boolean> call = () -> {
                try {
                    byte[] out = instance.execute(List.of(new ExecutionInput(direct(in.data()), FLOAT, in.shape())),
                            StreamSelection.none()).get(0).toArray();
                    float[] got = floats(out);
                    for (int i = 0; i < got.length; i++) {
                        assertThat(ref.close(got[i], expected.data().get(i))).as("element %d: %s", i, got[i]).isTrue();
                    }
                    return true;
                } catch (IllegalStateException refused) {
                    return false;
                }
            };
            ExecutorService pool = Executors.newSingleThreadExecutor();
            try {
                Future<Integer> other = pool.submit(() -> {
                    int ran = 0;
                    while (!stop.get()) {
                        ran += call.get() ? 1 : 0;
                    }
                    return ran;
                });
                int ranHere = 0;
                int refusedHere = 0;
                long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);  // a hang guard, not a bound
                while (refusedHere == 0 || ranHere == 0) {
                    if (other.isDone()) {
                        other.get();  // it failed (a wrong answer): say so, not "never refused"
                    }
                    assertThat(System.nanoTime()).as("never refused while the other thread called").isLessThan(giveUp);
                    if (call.get()) {
                        ranHere++;
                    } else {
                        refusedHere++;
                    }
                }
                stop.set(true);
                assertThat(other.get(60, TimeUnit.SECONDS)).isPositive();
            } finally {
                stop.set(true);
                pool.shutdownNow();
            }
        }
    }
}
