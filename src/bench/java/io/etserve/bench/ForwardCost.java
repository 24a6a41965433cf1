package io.etserve.bench;

import io.etserve.config.EtServeProperties;
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
 * process of its own, with the service's buffers (inputs in direct memory, outputs into direct
 * buffers handed to the bridge) and the service's CPU threadpool size, measured as the whole
 * process's CPU from /proc (ExecuTorch's threadpool workers included, as the service's figure
 * includes them). bench/data-path.sh runs it on the service's CPUs and subtracts it from the
 * service's CPU per request, which leaves the serving path's own cost: what the transport, the
 * protocol and the bridge add around the same call.
 *
 * <p>Two figures. <b>Hot</b>: the same input and output buffers every call, so a model of a few
 * MiB runs from the CPU's caches. <b>Cold</b>: each call on the next of enough buffer sets to
 * span {@value #COLD_SPAN_MIB} MiB, so its data comes from memory, as a request's does in the
 * service, where the socket copies between two calls evict it (with 4 MiB in and out, the
 * service's forward call takes about the cold figure's time, not the hot one's). The cold figure
 * is the one to subtract.
 *
 * <p>Usage: {@code ForwardCost MODEL_DIR SECONDS [CPU_THREADS]} (MODEL_DIR holds model.pte and
 * reference.json; CPU_THREADS as {@code etserve.native.cpu-threads}, 0 = the CPUs this process
 * may use). Prints one line per figure: {@code forward MODEL cold: N calls, W us wall, C us CPU
 * per call (...)}. Every buffer set's output is checked once against the reference, so a wrong
 * program cannot look cheap. Inputs and outputs are FP32, as the data-path models' are.
 */
public final class ForwardCost {

    private static final int COLD_SPAN_MIB = 512;

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        double seconds = Double.parseDouble(args[1]);
        int requested = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        // The service's own reading of etserve.native.cpu-threads (0: the CPUs this process may use)
        int asked = new EtServeProperties.Native(null, null, List.of(), Program.Verification.MINIMAL, false, requested)
                .cpuThreadsOrAvailable();
        int threads = NativeRuntime.sizeCpuThreads(asked);
        Reference reference = Reference.load(dir.resolve("reference.json"));
        Reference.Case first = reference.cases().get(0);
        String model = dir.getParent().getFileName().toString();
        try (Program program = Program.load(dir.resolve("model.pte"), Program.Verification.MINIMAL);
                ProgramInstance instance = program.newInstance("forward")) {
            long bytesPerSet = 0;
            for (Reference.TensorValue t : first.inputs()) {
                bytesPerSet += (long) t.data().size() * Float.BYTES;
            }
            for (Reference.TensorValue t : first.outputs()) {
                bytesPerSet += (long) t.data().size() * Float.BYTES;
            }
            int sets = (int) Math.max(2, Math.min(4096, ((long) COLD_SPAN_MIB << 20) / Math.max(1, bytesPerSet)));
            List<BufferSet> cold = new ArrayList<>();
            for (int i = 0; i < sets; i++) {
                BufferSet set = new BufferSet(first);
                BridgeExecuteBenchmark.verify(reference, first, set.call(instance));
                cold.add(set);
            }
            List<BufferSet> hot = List.of(cold.get(0));

            // Warm-up as long as a measurement: the JIT and the pool's threads settle first.
            run(instance, hot, seconds);
            measure("hot", model, threads, instance, hot, seconds);
            measure("cold", model, threads, instance, cold, seconds);
        }
    }

    private static void measure(String label, String model, int threads, ProgramInstance instance, List<BufferSet> sets,
            double seconds) {
        long pid = ProcessHandle.current().pid();
        ProcessCounters before = ProcessCounters.read(pid).orElseThrow();
        long start = System.nanoTime();
        long calls = run(instance, sets, seconds);
        double wallUs = (System.nanoTime() - start) / 1e3 / calls;
        ProcessCounters after = ProcessCounters.read(pid).orElseThrow();
        double cpuUs = (after.cpuTicks() - before.cpuTicks()) * 1e6 / ThreadCpu.TICKS_PER_SECOND / calls;
        System.out.printf("forward %s %s: %d calls, %.0f us wall, %.0f us CPU per call (%s; %d buffer sets; "
                + "CPU threadpool %d)%n", model, label, calls, wallUs, cpuUs, after.perCallSince(before, calls),
                sets.size(), threads);
    }

    private static long run(ProgramInstance instance, List<BufferSet> sets, double seconds) {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long calls = 0;
        while (System.nanoTime() < end) {
            sets.get((int) (calls % sets.size())).call(instance);
            calls++;
        }
        return calls;
    }

    /** One call's memory: its inputs, filled once with the reference's, and a buffer per output. */
    private static final class BufferSet {
        final List<ExecutionInput> inputs = new ArrayList<>();
        final List<ByteBuffer> outputs = new ArrayList<>();

        BufferSet(Reference.Case c) {
            for (Reference.TensorValue in : c.inputs()) {
                inputs.add(BridgeExecuteBenchmark.fp32Input(in));
            }
            for (Reference.TensorValue out : c.outputs()) {
                outputs.add(ByteBuffer.allocateDirect(out.data().size() * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN));
            }
        }

        List<ExecutionOutput> call(ProgramInstance instance) {
            return instance.execute(inputs, StreamSelection.none(), (output, bytes) -> outputs.get(output).clear());
        }
    }
}
