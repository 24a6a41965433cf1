package io.etserve.config;

import org.eclipse.jetty.io.ArrayByteBufferPool;

/**
 * A connector's buffer pool with room for the request buffer {@code etserve.http.input-buffer-size}
 * asks for. Jetty's default pool keeps buffers of at most 64 KiB; a larger request buffer was
 * never pooled, so every read from a connection allocated (and zeroed) a fresh direct buffer,
 * which made a larger input buffer cost more CPU per 4 MiB request instead of less
 * (bench/results/2026-12-07-2core-pooled-input-buffer.md).
 *
 * <p>Up to 64 KiB the buckets are Jetty's default ones, one every 4 KiB; above, one per power of
 * two up to the input buffer's size, so a 16 MiB input buffer adds 8 buckets, not 4,000. How much
 * the pool keeps is Jetty's default heuristic (an eighth of the maximum heap, each of heap and
 * direct memory).
 */
final class ConnectionBufferPool extends ArrayByteBufferPool {

    /** The largest buffer Jetty's default pool keeps, and the end of the 4 KiB steps here. */
    static final int JETTY_DEFAULT_LARGEST = 64 * 1024;

    private static final int STEP = 4096;
    private static final int LINEAR_BUCKETS = JETTY_DEFAULT_LARGEST / STEP;
    /** log2 of the first power-of-two bucket's capacity: twice Jetty's largest, 128 KiB. */
    private static final int FIRST_POWER = Integer.numberOfTrailingZeros(JETTY_DEFAULT_LARGEST) + 1;

    /**
     * @param largest the largest buffer to keep (the request buffer's size); rounded up to its
     *     bucket's capacity, and never below Jetty's default 64 KiB
     */
    ConnectionBufferPool(int largest) {
        super(0, STEP, bucketCapacity(bucketIndex(Math.max(largest, JETTY_DEFAULT_LARGEST))), Integer.MAX_VALUE, 0L,
                0L, ConnectionBufferPool::bucketIndex, ConnectionBufferPool::bucketCapacity);
    }

    static int bucketIndex(int capacity) {
        if (capacity <= JETTY_DEFAULT_LARGEST) {
            return Math.max(0, (capacity - 1) / STEP);
        }
        int log2 = Integer.SIZE - Integer.numberOfLeadingZeros(capacity - 1);  // the smallest n with 2^n >= capacity
        return LINEAR_BUCKETS + log2 - FIRST_POWER;  // 64 KiB + 1 .. 128 KiB: the first bucket after the steps
    }

    static int bucketCapacity(int index) {
        return index < LINEAR_BUCKETS ? (index + 1) * STEP : 1 << (index - LINEAR_BUCKETS + FIRST_POWER);
    }
}
