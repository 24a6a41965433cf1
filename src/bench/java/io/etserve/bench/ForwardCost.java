package io.etserve.bench;

import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.NativeRuntime;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import io.etserve.support.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The model's own share of a request's server CPU: one program's forward call back to back in a
 * process of its own, with the service's buffers (inputs in direct memory, outputs into a pooled
 * direct buffer) and the service's CPU threadpool size, measured as the whole process's CPU from
 * /proc (ExecuTorch's threadpool workers included, as the service's figure includes them).
 * bench/data-path.sh runs it on the service's CPUs and subtracts it from the service's CPU per
 * request, which leaves the serving path's own cost: what the transport, the protocol and the
 * bridge add around the same call.
 *
 * <p>Usage: {@code ForwardCost MODEL_DIR SECONDS [CPU_THREADS]} (MODEL_DIR holds model.pte and
 * reference.json; CPU_THREADS as {@code etserve.native.cpu-threads}, 0 = the CPUs this process
 * may use). Prints one line: {@code forward MODEL: N calls, W us wall, C us CPU per call (...)}.
 * The first call's output is checked against the reference, so a wrong program cannot look cheap.
 */
public final class ForwardCost {

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        double seconds = Double.parseDouble(args[1]);
        int requested = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        int threads = NativeRuntime.sizeCpuThreads(requested > 0 ? requested : Runtime.getRuntime().availableProcessors());
        Reference reference = Reference.load(dir.resolve("reference.json"));
        Reference.Case first = reference.cases().get(0);
        DirectBufferPool pool = new DirectBufferPool(1L << 30);
        try (Program program = Program.load(dir.resolve("model.pte"), Program.Verification.MINIMAL);
                ProgramInstance instance = program.newInstance("forward")) {
            List<ExecutionInput> inputs = new ArrayList<>();
            for (Reference.TensorValue in : first.inputs()) {
                ByteBuffer data = ByteBuffer.allocateDirect(in.data().size() * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
                in.data().forEach(v -> data.putFloat(v.floatValue()));
                inputs.add(new ExecutionInput(data.flip(), 6 /* FP32 */, in.shape()));
            }
            List<ExecutionOutput> checked = instance.execute(inputs, StreamSelection.none(), pool);
            BridgeExecuteBenchmark.verify(reference, first, checked);
            checked.forEach(out -> pool.release(out.data()));

            // Warm-up as long as the measurement: the JIT and the pool's threads settle first.
            run(instance, inputs, pool, seconds);
            long pid = ProcessHandle.current().pid();
            ProcessCounters before = ProcessCounters.read(pid).orElseThrow();
            long start = System.nanoTime();
            long calls = run(instance, inputs, pool, seconds);
            double wallUs = (System.nanoTime() - start) / 1e3 / calls;
            ProcessCounters after = ProcessCounters.read(pid).orElseThrow();
            double cpuUs = (after.cpuTicks() - before.cpuTicks()) * 1e6 / ThreadCpu.TICKS_PER_SECOND / calls;
            System.out.printf("forward %s: %d calls, %.0f us wall, %.0f us CPU per call (%s; CPU threadpool %d)%n",
                    dir.getParent().getFileName(), calls, wallUs, cpuUs, after.perCallSince(before, calls), threads);
        }
    }

    private static long run(ProgramInstance instance, List<ExecutionInput> inputs, DirectBufferPool pool, double seconds) {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long calls = 0;
        while (System.nanoTime() < end) {
            for (ExecutionOutput out : instance.execute(inputs, StreamSelection.none(), pool)) {
                pool.release(out.data());
            }
            calls++;
        }
        return calls;
    }
}
