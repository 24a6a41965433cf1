package io.etserve.repository;

import io.etserve.execution.ExecutionSlot;
import io.etserve.execution.InstancePool;
import io.etserve.execution.TensorContract;
import io.etserve.inference.DataType;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.Warmup;
import io.etserve.runtime.ExecutionInput;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** Runs a model's {@link Warmup} on every instance of a freshly loaded version, before it reports ready. */
public final class WarmupCalls {

    private static final Duration ACQUIRE = Duration.ofMinutes(1);
    private static final int MAX_FILE_BYTES = 64 * 1024 * 1024;

    private WarmupCalls() {}

    /** {@link #run(Warmup, InstancePool, List, long[][], Path)} for zeros and random inputs. */
    public static void run(Warmup warmup, InstancePool pool, List<TensorMetadata> inputs, long[][] bounds) {
        run(warmup, pool, inputs, bounds, null);
    }

    /**
     * Runs the samples; throws with the reason when a call fails or the file does not fit the
     * method (the load then fails).
     *
     * @param versionDir where a {@link Data#FILE} warm-up file lives
     */
    public static void run(Warmup warmup, InstancePool pool, List<TensorMetadata> inputs, long[][] bounds,
            Path versionDir) {
        int samples = warmup.samples();
        if (samples == 0) {
            return;
        }
        List<ExecutionInput> values = warmup.data() == Warmup.Data.FILE
                ? fromFile(versionDir.resolve(warmup.file()), inputs, bounds)
                : inputs(warmup.data(), inputs, bounds);
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

    private static List<ExecutionInput> inputs(Warmup.Data data, List<TensorMetadata> inputs, long[][] bounds) {
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
            if (data == Warmup.Data.RANDOM) {
                fillRandom(buffer, meta.dataType(), random);
            }
            values.add(new ExecutionInput(buffer, meta.dataType().executorchCode(), shape));
        }
        return values;
    }

    /**
     * {@code {"inputs": [{"name", "datatype", "shape", "data"}]}}, the protocol's JSON request
     * body (what a client would send), one entry per input of the method; numbers only.
     */
    static List<ExecutionInput> fromFile(Path path, List<TensorMetadata> inputs, long[][] bounds) {
        JsonNode root;
        try {
            if (Files.size(path) > MAX_FILE_BYTES) {
                throw new IllegalStateException("warm-up file " + path.getFileName() + " is over 64 MB");
            }
            root = JsonMapper.builder().build().readTree(path.toFile());
        } catch (IOException | JacksonException e) {
            throw new IllegalStateException("cannot read the warm-up file " + path.getFileName() + ": " + e.getMessage());
        }
        List<ExecutionInput> values = new ArrayList<>(inputs.size());
        for (int i = 0; i < inputs.size(); i++) {
            TensorMetadata meta = inputs.get(i);
            JsonNode entry = null;
            for (JsonNode e : root.path("inputs")) {
                if (meta.name().equals(e.path("name").asString(null))) {
                    entry = e;
                }
            }
            String where = "warm-up file " + path.getFileName() + ", input '" + meta.name() + "'";
            if (entry == null) {
                throw new IllegalStateException(where + ": missing");
            }
            if (!meta.dataType().protocolName().equals(entry.path("datatype").asString(null)) || !meta.dataType().jsonRepresentable()) {
                throw new IllegalStateException(where + ": datatype must be " + meta.dataType().protocolName()
                        + (meta.dataType().jsonRepresentable() ? "" : ", which JSON cannot carry"));
            }
            long[] shape = new long[entry.path("shape").size()];
            for (int d = 0; d < shape.length; d++) {
                shape[d] = entry.path("shape").get(d).asLong();
            }
            try {
                TensorContract.checkShape(meta, shape, bounds[i]);
            } catch (InvalidInputException e) {
                throw new IllegalStateException(where + ": " + e.getMessage());
            }
            long elements = 1;
            for (long d : shape) {
                elements *= d;
            }
            JsonNode data = entry.path("data");
            if (!data.isArray() || data.size() != elements) {
                throw new IllegalStateException(where + ": 'data' must hold " + elements + " numbers for shape "
                        + Arrays.toString(shape));
            }
            ByteBuffer buffer = ByteBuffer.allocateDirect(Math.toIntExact(elements * meta.dataType().byteSize()))
                    .order(ByteOrder.LITTLE_ENDIAN);
            for (JsonNode v : data) {
                switch (meta.dataType()) {
                    case FP32 -> buffer.putFloat((float) v.asDouble());
                    case FP64 -> buffer.putDouble(v.asDouble());
                    case INT64, UINT64 -> buffer.putLong(v.asLong());
                    case INT32, UINT32 -> buffer.putInt((int) v.asLong());
                    case INT16, UINT16 -> buffer.putShort((short) v.asLong());
                    case BOOL -> buffer.put((byte) (v.asBoolean() || v.asLong() != 0 ? 1 : 0));
                    default -> buffer.put((byte) v.asLong());
                }
            }
            values.add(new ExecutionInput(buffer.flip(), meta.dataType().executorchCode(), shape));
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
