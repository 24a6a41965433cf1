package io.etserve.bench;

import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

/**
 * One forward call through {@link ProgramInstance#execute}: the in-process floor that the REST
 * numbers from {@link LoadGenerator} are compared against. The pattern is the service's: one
 * shared {@link Program} per model, one instance per thread.
 *
 * <p>Run through {@code bench/run-cpu.sh}, or directly:
 * {@code java -cp <test classpath> org.openjdk.jmh.Main BridgeExecuteBenchmark}.
 */
@BenchmarkMode({Mode.SampleTime, Mode.Throughput})
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xss4m"})
public class BridgeExecuteBenchmark {

    private static final int FP32 = 6;

    /** The model, shared by every benchmark thread as the service shares it across instances. */
    @State(Scope.Benchmark)
    public static class Model {
        @Param({"demo-portable", "demo-xnnpack"})
        public String model;

        Program program;
        Reference reference;

        @Setup(Level.Trial)
        public void load() {
            Path dir = TestPaths.demoModels().resolve(model).resolve("1");
            reference = Reference.load(dir.resolve("reference.json"));
            program = Program.load(dir.resolve("model.pte"), Program.Verification.INTERNAL_CONSISTENCY);
        }

        @TearDown(Level.Trial)
        public void close() {
            program.close();
        }
    }

    /** A thread's own instance and input; the input is checked once so the loop measures a correct call. */
    @State(Scope.Thread)
    public static class Worker {
        ProgramInstance instance;
        List<ExecutionInput> inputs;
        final DirectBufferPool pool = new DirectBufferPool(1 << 20);

        @Setup(Level.Trial)
        public void open(Model model) {
            instance = model.program.newInstance("forward");
            Reference.Case first = model.reference.cases().get(0);
            inputs = List.of(fp32Input(first.inputs().get(0)));
            verify(model.reference, first, instance.execute(inputs, StreamSelection.none()));
        }

        @TearDown(Level.Trial)
        public void close() {
            instance.close();
        }
    }

    @Benchmark
    @Threads(1)
    public List<ExecutionOutput> execute1Thread(Worker worker) {
        return worker.instance.execute(worker.inputs, StreamSelection.none());
    }

    @Benchmark
    @Threads(2)
    public List<ExecutionOutput> execute2Threads(Worker worker) {
        return worker.instance.execute(worker.inputs, StreamSelection.none());
    }

    /**
     * The service's path: each output copied into a pooled direct buffer that goes back after the
     * call, so what the call allocates is the bridge's own (run with {@code -prof gc}). Average
     * time only: BenchReport's table of the in-process floor stays the two methods above.
     */
    @Benchmark
    @BenchmarkMode(Mode.AverageTime)
    @Threads(1)
    public long executePooled1Thread(Worker worker) {
        long bytes = 0;
        for (ExecutionOutput out : worker.instance.execute(worker.inputs, StreamSelection.none(), worker.pool)) {
            bytes += out.data().remaining();
            worker.pool.release(out.data());
        }
        return bytes;
    }

    /** A reference input as the service hands it over: FP32 values in a direct little-endian buffer. */
    static ExecutionInput fp32Input(Reference.TensorValue in) {
        ByteBuffer data = ByteBuffer.allocateDirect(in.data().size() * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        in.data().forEach(v -> data.putFloat(v.floatValue()));
        return new ExecutionInput(data.flip(), FP32, in.shape());
    }

    static void verify(Reference reference, Reference.Case c, List<ExecutionOutput> outputs) {
        List<Double> expected = c.outputs().get(0).data();
        if (outputs.size() != c.outputs().size()) {
            throw new IllegalStateException("expected " + c.outputs().size() + " outputs, got " + outputs.size());
        }
        ByteBuffer got = outputs.get(0).data().order(ByteOrder.LITTLE_ENDIAN);
        if (got.remaining() != expected.size() * Float.BYTES) {
            throw new IllegalStateException("output has " + got.remaining() + " bytes, expected "
                    + expected.size() * Float.BYTES);
        }
        for (int i = 0; i < expected.size(); i++) {
            float v = got.getFloat();
            if (!reference.close(v, expected.get(i))) {
                throw new IllegalStateException("output " + i + " is " + v + ", reference says " + expected.get(i));
            }
        }
    }
}
