package io.etserve.runtime;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Direct buffers for tensor data (request sections, JSON-decoded inputs, outputs), reused
 * across requests. Allocating direct memory is slow (it is zeroed, reserved and given a
 * cleaner) and large heap arrays churn the collector; a request instead takes buffers from
 * power-of-two buckets and gives them back when its response is written. Buffers kept idle are
 * bounded by {@code maxRetainedBytes}; one not given back (an exception between decode and
 * write) is simply collected, never reused. Buffers are little-endian, as the protocol's binary
 * data and ExecuTorch's tensors are.
 */
public final class DirectBufferPool implements OutputBuffers {

    private static final int MIN_SHIFT = 12;  // 4 KiB: smaller requests share one bucket
    private static final int MAX_SHIFT = 30;  // 1 GiB: larger ones are allocated exactly, not kept

    private final ConcurrentLinkedDeque<ByteBuffer>[] buckets;
    private final long maxRetainedBytes;
    private final AtomicLong retained = new AtomicLong();

    @SuppressWarnings("unchecked")
    public DirectBufferPool(long maxRetainedBytes) {
        this.maxRetainedBytes = maxRetainedBytes;
        this.buckets = new ConcurrentLinkedDeque[MAX_SHIFT + 1];
        for (int i = MIN_SHIFT; i <= MAX_SHIFT; i++) {
            buckets[i] = new ConcurrentLinkedDeque<>();
        }
    }

    /** A buffer with position 0 and limit {@code bytes}; its contents are undefined. */
    public ByteBuffer acquire(long bytes) {
        if (bytes < 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a direct buffer holds 0 to 2 GiB, not " + bytes + " bytes");
        }
        int shift = shiftFor((int) bytes);
        ByteBuffer b = shift <= MAX_SHIFT ? buckets[shift].pollFirst() : null;
        if (b != null) {
            retained.addAndGet(-b.capacity());
        } else {
            b = ByteBuffer.allocateDirect(shift <= MAX_SHIFT ? 1 << shift : (int) bytes);
        }
        return b.clear().limit((int) bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Gives {@code buffer} (one from {@link #acquire}, not a slice of it) back; it must not be used after. */
    public void release(ByteBuffer buffer) {
        int capacity = buffer.capacity();
        int shift = Integer.numberOfTrailingZeros(capacity);
        if (capacity != 1 << shift || shift < MIN_SHIFT || shift > MAX_SHIFT || !buffer.isDirect()) {
            return;  // not one of ours (or too large to keep): the collector frees it
        }
        if (retained.addAndGet(capacity) > maxRetainedBytes) {
            retained.addAndGet(-capacity);
            return;
        }
        buckets[shift].offerFirst(buffer);
    }

    @Override
    public ByteBuffer allocate(int output, long bytes) {
        return acquire(bytes);
    }

    /** Bytes held idle for reuse. */
    public long retainedBytes() {
        return retained.get();
    }

    private static int shiftFor(int bytes) {
        int shift = bytes <= 1 ? 0 : 32 - Integer.numberOfLeadingZeros(bytes - 1);
        return Math.max(MIN_SHIFT, shift);
    }
}
