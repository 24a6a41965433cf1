package io.etserve.bench;

import io.etserve.execution.CpuInstancePool;
import io.etserve.execution.ExecutionSlot;
import io.etserve.execution.FaultListener;
import io.etserve.inference.DataType;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.Warmup;
import io.etserve.repository.WarmupCalls;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.MethodSignature;
import io.etserve.runtime.Program;
import io.etserve.runtime.TensorSpec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * First-call latency of a freshly loaded model in a fresh JVM, with and without {@code warmup:}
 * (bench/first-request.sh). Usage: FirstRequestLatency MODEL.pte WARMUP_SAMPLES
 */
public final class FirstRequestLatency {

    private FirstRequestLatency() {}

    public static void main(String[] args) throws Exception {
        Path pte = Path.of(args[0]);
        int samples = Integer.parseInt(args[1]);
        try (Program program = Program.load(pte, Program.Verification.MINIMAL);
                CpuInstancePool pool = new CpuInstancePool(List.of(program.newInstance("forward")))) {
            MethodSignature signature = program.signature("forward");
            TensorSpec spec = signature.inputs().get(0);
            ModelDescription model = new ModelDescription("bench", "1", signature,
                    List.of(new TensorMetadata("x", DataType.FP32, spec.sizes())), List.of());
            long started = System.nanoTime();
            // Random data reads no file: no decoder needed.
            WarmupCalls.run(new Warmup(samples, Warmup.Data.RANDOM), pool, model, Long.MAX_VALUE, null, body -> {
                throw new UnsupportedOperationException("no warm-up file here");
            }, FaultListener.NONE);
            long warmupNanos = System.nanoTime() - started;
            double[] calls = new double[3];
            for (int i = 0; i < calls.length; i++) {
                ByteBuffer in = ByteBuffer.allocateDirect(Math.toIntExact(numel(spec.sizes()) * 4))
                        .order(ByteOrder.LITTLE_ENDIAN);
                while (in.hasRemaining()) {
                    in.putFloat(0.25f);
                }
                in.flip();
                long t = System.nanoTime();
                try (ExecutionSlot slot = pool.acquire(Duration.ofSeconds(5))) {
                    slot.instance().execute(List.of(new ExecutionInput(in, 6, spec.sizes())), slot.selection());
                }
                calls[i] = (System.nanoTime() - t) / 1e6;
            }
            System.out.printf("{\"program\":\"%s\",\"warmup_samples\":%d,\"warmup_ms\":%.3f,\"first_ms\":%.3f,"
                    + "\"second_ms\":%.3f,\"third_ms\":%.3f}%n", pte.getParent().getParent().getFileName(), samples,
                    warmupNanos / 1e6, calls[0], calls[1], calls[2]);
        }
    }

    private static long numel(long[] sizes) {
        long n = 1;
        for (long d : sizes) {
            n *= d;
        }
        return n;
    }
}
