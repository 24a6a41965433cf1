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
 * initialisation (XNNPACK's workspaces, GPU contexts and kernels). Zeros and random inputs take
 * each dimension at its upper bound; a file gives representative inputs (shapes a delegate
 * should see first, real values).
 */
public record Warmup(int samples, Data data, String file) {

    public enum Data {
        ZEROS,
        RANDOM,
        /** Representative inputs from a file in the version directory (the protocol's JSON request). */
        FILE
    }

    public static final Warmup NONE = new Warmup(0, Data.ZEROS);
    private static final int MAX_FILE_BYTES = 64 * 1024 * 1024;

    public Warmup(int samples, Data data) {
        this(samples, data, null);
    }
    private static final Duration ACQUIRE = Duration.ofMinutes(1);

    /** {@link #run(InstancePool, List, long[][], java.nio.file.Path)} for zeros and random inputs. */
    public void run(InstancePool pool, List<TensorMetadata> inputs, long[][] bounds) {
        run(pool, inputs, bounds, null);
    }

    /**
     * Runs the samples; throws with the reason when a call fails or the file does not fit the
     * method (the load then fails).
     *
     * @param versionDir where a {@link Data#FILE} warm-up file lives
     */
    public void run(InstancePool pool, List<TensorMetadata> inputs, long[][] bounds, java.nio.file.Path versionDir) {
        if (samples == 0) {
            return;
        }
        List<ExecutionInput> values = data == Data.FILE ? fromFile(versionDir.resolve(file), inputs, bounds)
                : inputs(inputs, bounds);
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

    /**
     * {@code {"inputs": [{"name", "datatype", "shape", "data"}]}}, the protocol's JSON request
     * body (what a client would send), one entry per input of the method; numbers only.
     */
    static List<ExecutionInput> fromFile(java.nio.file.Path path, List<TensorMetadata> inputs, long[][] bounds) {
        tools.jackson.databind.JsonNode root;
        try {
            if (java.nio.file.Files.size(path) > MAX_FILE_BYTES) {
                throw new IllegalStateException("warm-up file " + path.getFileName() + " is over 64 MB");
            }
            root = tools.jackson.databind.json.JsonMapper.builder().build().readTree(path.toFile());
        } catch (java.io.IOException | tools.jackson.core.JacksonException e) {
            throw new IllegalStateException("cannot read the warm-up file " + path.getFileName() + ": " + e.getMessage());
        }
        List<ExecutionInput> values = new ArrayList<>(inputs.size());
        for (int i = 0; i < inputs.size(); i++) {
            TensorMetadata meta = inputs.get(i);
            tools.jackson.databind.JsonNode entry = null;
            for (tools.jackson.databind.JsonNode e : root.path("inputs")) {
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
            tools.jackson.databind.JsonNode data = entry.path("data");
            if (!data.isArray() || data.size() != elements) {
                throw new IllegalStateException(where + ": 'data' must hold " + elements + " numbers for shape "
                        + java.util.Arrays.toString(shape));
            }
            ByteBuffer buffer = ByteBuffer.allocateDirect(Math.toIntExact(elements * meta.dataType().byteSize()))
                    .order(ByteOrder.LITTLE_ENDIAN);
            for (tools.jackson.databind.JsonNode v : data) {
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
