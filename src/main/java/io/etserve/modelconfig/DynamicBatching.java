package io.etserve.modelconfig;

import java.time.Duration;
import java.util.List;

/**
 * A model's {@code dynamic-batching} in config.yml: requests that arrive close together are
 * joined along dimension 0 and run as one forward call.
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

    public DynamicBatching {
        if (maxBatchSize < 1 || maxBatchSize > MAX_BATCH_SIZE) {
            throw new IllegalArgumentException("max-batch-size must be 1.." + MAX_BATCH_SIZE + ", got " + maxBatchSize);
        }
        if (maxQueueDelay.isNegative() || maxQueueDelay.compareTo(MAX_QUEUE_DELAY) > 0) {
            throw new IllegalArgumentException("max-queue-delay must be 0.." + MAX_QUEUE_DELAY.toSeconds() + "s, got "
                    + maxQueueDelay.toMillis() + "ms");
        }
        preferredBatchSizes = preferredBatchSizes.stream().sorted().distinct().toList();
        for (int size : preferredBatchSizes) {
            if (size < 1 || size > maxBatchSize) {
                throw new IllegalArgumentException("preferred-batch-sizes must lie in 1..max-batch-size ("
                        + maxBatchSize + "), got " + size);
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
