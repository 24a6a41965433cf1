package io.etserve.inference;

import io.etserve.runtime.ExecutionInput;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * {@code warmup:} in config.yml: runs a few calls on every instance (on every device it is
 * placed on) before the model reports ready, so the first request does not pay for lazy
 * initialisation (XNNPACK's workspaces, GPU contexts and kernels). Inputs take each dimension
 * at its upper bound.
 */
public record Warmup(int samples, Data data) {

    public enum Data {
        ZEROS,
        RANDOM
    }

    public static final Warmup NONE = new Warmup(0, Data.ZEROS);
    private static final Duration ACQUIRE = Duration.ofMinutes(1);

    /** Runs the samples; throws with the reason when a call fails (the load then fails). */
    public void run(InstancePool pool, List<TensorMetadata> inputs, long[][] bounds) {
        if (samples == 0) {
            return;
        }
        List<ExecutionInput> values = inputs(inputs, bounds);
        for (int sample = 0; sample < samples; sample++) {
            // One call at a time, as many as the pool has instances: the pools hand out their
            // idle instances in FIFO order (and MultiDeviceInstancePool rotates devices), so
            // each instance runs once per sample. Holding them all at once instead would wait
            // for streams forever when a model has more instances than its device has streams.
            for (int call = 0; call < pool.capacity(); call++) {
                try (ExecutionSlot slot = pool.acquire(ACQUIRE)) {
                    for (ExecutionInput in : values) {
                        in.data().rewind();
                    }
                    slot.instance().execute(values, slot.selection());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("warm-up interrupted");
                } catch (RuntimeException e) {
                    throw new IllegalStateException("warm-up call " + (sample + 1) + " of " + samples + " failed: "
                            + e.getMessage(), e);
                }
            }
        }
    }

    private List<ExecutionInput> inputs(List<TensorMetadata> inputs, long[][] bounds) {
        SplittableRandom random = new SplittableRandom(42);
        List<ExecutionInput> values = new ArrayList<>(inputs.size());
        for (int i = 0; i < inputs.size(); i++) {
            TensorMetadata meta = inputs.get(i);
            long[] shape = meta.shape();
            long elements = 1;
            for (int d = 0; d < shape.length; d++) {
                if (shape[d] < 0) {
                    shape[d] = bounds[i][d];
                }
                elements *= shape[d];
            }
            int size = Math.toIntExact(elements * meta.dataType().byteSize());
            ByteBuffer buffer = ByteBuffer.allocateDirect(size).order(ByteOrder.LITTLE_ENDIAN);
            if (data == Data.RANDOM) {
                fillRandom(buffer, meta.dataType(), random);
            }
            values.add(new ExecutionInput(buffer, meta.dataType().executorchCode(), shape));
        }
        return values;
    }

    private static void fillRandom(ByteBuffer buffer, DataType type, SplittableRandom random) {
        // Floats in [-1, 1); other types get small non-negative integers (valid indices, bools).
        while (buffer.hasRemaining()) {
            switch (type) {
                case FP32 -> buffer.putFloat((float) (random.nextDouble() * 2 - 1));
                case FP64 -> buffer.putDouble(random.nextDouble() * 2 - 1);
                default -> buffer.put((byte) (buffer.position() % type.byteSize() == 0 ? random.nextInt(2) : 0));
            }
        }
        buffer.flip();
    }
}
