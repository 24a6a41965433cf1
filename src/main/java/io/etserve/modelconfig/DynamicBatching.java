package io.etserve.modelconfig;

import io.etserve.inference.ModelDescription;
import io.etserve.inference.TensorMetadata;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/**
 * A model's {@code dynamic-batching} in config.yml: requests that arrive close together are
 * joined along dimension 0 and run as one forward call. The one place its rules live: config.yml
 * and a load's Triton configuration only read their syntax and build it through {@link #of}, and
 * the loader asks {@link #checkFits} whether the program can take it.
 *
 * @param maxBatchSize rows per forward call (a request of more rows runs alone)
 * @param maxQueueDelay how long the first queued request waits for company
 * @param preferredBatchSizes sizes a batch is cut to when it can be (ascending); empty for none
 */
public record DynamicBatching(int maxBatchSize, Duration maxQueueDelay, List<Integer> preferredBatchSizes) {

    /** A bound that keeps one batch's concatenated tensors and its queue scan small. */
    public static final int MAX_BATCH_SIZE = 4096;
    /** Longer delays are a mistake for an online server: every lone request would wait this long. */
    public static final Duration MAX_QUEUE_DELAY = Duration.ofSeconds(10);

    /** What a document calls the setting and its fields, so that a refusal speaks its language. */
    public record Names(String section, String maxBatchSize, String maxQueueDelay, String preferredBatchSizes) {
        /** config.yml's {@code dynamic-batching}. */
        public static final Names CONFIG_YML = new Names("dynamic-batching", "max-batch-size", "max-queue-delay",
                "preferred-batch-sizes");
        /** Triton's model configuration ({@code max_batch_size} beside {@code dynamic_batching}). */
        public static final Names TRITON = new Names("dynamic_batching", "max_batch_size",
                "max_queue_delay_microseconds", "preferred_batch_size");
    }

    public DynamicBatching {
        check(maxBatchSize, maxQueueDelay, preferredBatchSizes, Names.CONFIG_YML);
        preferredBatchSizes = preferredBatchSizes.stream().sorted().distinct().toList();
    }

    /**
     * The setting as a document gives it, checked.
     *
     * @param maxBatchSize null when the document does not give one
     * @param preferredBatchSizes null when the document gives none
     * @throws IllegalArgumentException saying what is wrong in the document's names
     */
    public static DynamicBatching of(Integer maxBatchSize, Duration maxQueueDelay, List<Integer> preferredBatchSizes,
            Names names) {
        if (maxBatchSize == null) {
            throw new IllegalArgumentException("'" + names.section() + "' needs " + names.maxBatchSize()
                    + " of at least 1 (rows joined per forward call)");
        }
        List<Integer> preferred = preferredBatchSizes == null ? List.of() : preferredBatchSizes;
        check(maxBatchSize, maxQueueDelay, preferred, names);
        return new DynamicBatching(maxBatchSize, maxQueueDelay, preferred);
    }

    private static void check(int maxBatchSize, Duration maxQueueDelay, List<Integer> preferred, Names names) {
        String in = "'" + names.section() + "' ";
        if (maxBatchSize < 1 || maxBatchSize > MAX_BATCH_SIZE) {
            throw new IllegalArgumentException(in + names.maxBatchSize() + " must be a positive integer up to "
                    + MAX_BATCH_SIZE + ", got " + maxBatchSize);
        }
        if (maxQueueDelay.isNegative() || maxQueueDelay.compareTo(MAX_QUEUE_DELAY) > 0) {
            throw new IllegalArgumentException(in + names.maxQueueDelay() + " must be 0.." + MAX_QUEUE_DELAY.toSeconds()
                    + "s, got " + maxQueueDelay.toMillis() + "ms");
        }
        for (Integer size : preferred) {
            if (size == null || size < 1 || size > maxBatchSize) {
                throw new IllegalArgumentException(in + names.preferredBatchSizes() + " must lie in 1.."
                        + names.maxBatchSize() + " (" + maxBatchSize + "), got " + size);
            }
        }
    }

    /**
     * Whether {@code model}'s method can be batched this way: every input's dimension 0 dynamic,
     * with a bound of at least {@code max-batch-size}, and every output batched along it.
     *
     * @throws IllegalArgumentException saying which tensor cannot
     */
    public void checkFits(ModelDescription model) {
        for (int i = 0; i < model.inputs().size(); i++) {
            TensorMetadata in = model.inputs().get(i);
            long[] shape = in.shape();
            if (shape.length == 0 || shape[0] != -1) {
                throw new IllegalArgumentException("dynamic-batching needs every input's dimension 0 to be dynamic;"
                        + " input '" + in.name() + "' has shape " + Arrays.toString(shape)
                        + " (export it with a dynamic batch dimension, e.g. torch.export.Dim(\"batch\", max=N))");
            }
            long bound = model.signature().inputs().get(i).sizes()[0];
            if (maxBatchSize > bound) {
                throw new IllegalArgumentException("dynamic-batching max-batch-size " + maxBatchSize
                        + " is over the bound of input '" + in.name() + "': the program was exported for at most "
                        + bound + " rows");
            }
        }
        for (TensorMetadata out : model.outputs()) {
            if (out.shape().length == 0) {
                throw new IllegalArgumentException("dynamic-batching needs every output batched along dimension 0;"
                        + " output '" + out.name() + "' is a scalar");
            }
        }
    }

    /** Rows at which a forming batch goes at once, without waiting out the delay. */
    public int dispatchRows() {
        return preferredBatchSizes.isEmpty() ? maxBatchSize : preferredBatchSizes.get(preferredBatchSizes.size() - 1);
    }

    /**
     * The most rows to take when {@code available} compatible rows are queued: the largest
     * preferred size that fits, else everything up to the maximum.
     */
    public int cut(int available) {
        int rows = Math.min(available, maxBatchSize);
        for (int i = preferredBatchSizes.size() - 1; i >= 0; i--) {
            if (preferredBatchSizes.get(i) <= rows) {
                return preferredBatchSizes.get(i);
            }
        }
        return rows;
    }
}
