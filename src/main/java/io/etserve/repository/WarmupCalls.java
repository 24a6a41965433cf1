package io.etserve.repository;

import io.etserve.execution.ExecutionSlot;
import io.etserve.execution.FaultListener;
import io.etserve.execution.InstancePool;
import io.etserve.execution.TensorContract;
import io.etserve.inference.DataType;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.ModelDescription;
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
import java.util.List;
import java.util.SplittableRandom;
import tools.jackson.core.JacksonException;
import tools.jackson.core.TokenStreamLocation;

/** Runs a model's {@link Warmup} on every instance of a freshly loaded version, before it reports ready. */
public final class WarmupCalls {

    private static final Duration ACQUIRE = Duration.ofMinutes(1);
    private static final long MAX_FILE_BYTES = 64 * 1024 * 1024;

    /**
     * Decodes a warm-up file, which is the protocol's JSON {@code /infer} request body: the
     * protocol layer's own decoder does it (wired in by the configuration), so a file is read
     * exactly as a client's request would be, with the same checks and messages.
     */
    @FunctionalInterface
    public interface RequestDecoder {
        InferenceRequest decode(byte[] body);
    }

    private WarmupCalls() {}

    /**
     * Runs the samples; throws with the reason when a call fails or the file does not fit the
     * method (the load then fails).
     *
     * @param model the version's description: its inputs, and the signature's bounds for the dynamic ones
     * @param maxElementsPerTensor the version's element limit, which a file's inputs must keep too
     * @param versionDir where a {@link Warmup.Data#FILE} warm-up file lives
     * @param faults told of a failed call and its device, as a served call's failure is: a sticky
     *     CUDA fault met during warm-up marks the device as one met while serving does
     */
    public static void run(Warmup warmup, InstancePool pool, ModelDescription model, long maxElementsPerTensor,
            Path versionDir, RequestDecoder decoder, FaultListener faults) {
        int samples = warmup.samples();
        if (samples == 0) {
            return;
        }
        List<ExecutionInput> values = warmup.data() == Warmup.Data.FILE
                ? fromFile(versionDir.resolve(warmup.file()), model, maxElementsPerTensor, decoder)
                : generated(warmup.data(), model);
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
                    try {
                        slot.instance().execute(values, slot.selection());
                    } catch (RuntimeException e) {
                        faults.onRuntimeFailure(slot.selection().onDevice(), e);
                        throw e;
                    }
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

    /** Zeros or random values, every dynamic dimension at its bound. */
    private static List<ExecutionInput> generated(Warmup.Data data, ModelDescription model) {
        SplittableRandom random = new SplittableRandom(42);
        List<TensorMetadata> inputs = model.inputs();
        List<ExecutionInput> values = new ArrayList<>(inputs.size());
        for (int i = 0; i < inputs.size(); i++) {
            TensorMetadata meta = inputs.get(i);
            long[] bounds = model.signature().inputs().get(i).sizes();
            long[] shape = meta.shape();
            long elements = 1;
            for (int d = 0; d < shape.length; d++) {
                if (shape[d] < 0) {
                    shape[d] = bounds[d];
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

    /** The file's request, decoded as a client's would be and bound by the method's contract. */
    static List<ExecutionInput> fromFile(Path path, ModelDescription model, long maxElementsPerTensor,
            RequestDecoder decoder) {
        byte[] body;
        try {
            if (Files.size(path) > MAX_FILE_BYTES) {
                throw new IllegalStateException("warm-up file " + path.getFileName() + " is over 64 MB");
            }
            body = Files.readAllBytes(path);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read the warm-up file " + path.getFileName() + ": " + e.getMessage());
        }
        try {
            return TensorContract.bindInputs(model, maxElementsPerTensor, decoder.decode(body));
        } catch (RuntimeException e) {
            if (e.getCause() instanceof JacksonException json) {
                // Where, not Jackson's words: they quote the file's text (a link to another file would show it).
                TokenStreamLocation at = json.getLocation();
                throw new IllegalStateException("warm-up file " + path.getFileName() + " is not valid JSON"
                        + (at == null ? "" : " (line " + at.getLineNr() + ", column " + at.getColumnNr() + ")"), e);
            }
            // A refusal of the decoder (protocol) or of the contract: the request's own words.
            throw new IllegalStateException("warm-up file " + path.getFileName() + ": " + e.getMessage(), e);
        }
    }

    /** Floats in [-1, 1); other types get small non-negative integers (valid indices, bools). */
    private static void fillRandom(ByteBuffer buffer, DataType type, SplittableRandom random) {
        boolean real = type.kind() == DataType.Kind.FLOAT && type.byteSize() >= Float.BYTES;
        while (buffer.hasRemaining()) {
            if (!real) {
                type.putBits(buffer, random.nextInt(2));
            } else if (type.byteSize() == Float.BYTES) {
                type.putBits(buffer, Float.floatToRawIntBits((float) (random.nextDouble() * 2 - 1)));
            } else {
                type.putBits(buffer, Double.doubleToRawLongBits(random.nextDouble() * 2 - 1));
            }
        }
        buffer.flip();
    }
}
