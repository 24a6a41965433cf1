package io.etserve.inference;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Bounds the request bytes held at once across all models and both protocols. A body (a REST
 * request's, a gRPC message) is read and decoded before it waits for one of its model's
 * instances, so without this a burst of large requests on a small model could hold
 * (connections x body size) of memory.
 *
 * <p>A body reserves the bytes that have arrived, as they arrive, never what its
 * {@code Content-Length} declares: a client that declares 64 MB and trickles a few bytes holds a
 * few bytes of the budget, and eight uploads stalled at 33 MiB hold 264 MiB of 512, not all of
 * it. ({@link RequestBody} holds them in chunks, so the memory behind a reservation is what
 * arrived and the rest of one chunk per part: at most 1 MiB, or what was already waiting.) Reservations never wait (they are made
 * on the thread that reads bodies for every connection): when the budget is spent the request
 * gets 503 at once.
 *
 * <p>Room the budget has left may also be lent ahead ({@link Reservation#presize}): a body of a
 * declared length then takes one buffer for all of its binary part at its first byte, so its
 * pieces need no second copy to become one tensor. What is lent counts only against that room
 * (held plus lent stays within the budget), never towards a 503, and becomes held as it arrives:
 * a stalled upload that was lent its length keeps others out of the room, not out of the budget.
 */
public final class InflightBytes {

    private static final Duration RETRY_AFTER = Duration.ofSeconds(1);

    private final long maxBytes;
    private final AtomicLong held = new AtomicLong();
    /** Bytes lent ahead of their arrival ({@link Reservation#presize}). */
    private final AtomicLong lent = new AtomicLong();

    public InflightBytes(long maxBytes) {
        this.maxBytes = Math.max(1, maxBytes);
    }

    /** Bytes reserved now, all requests together. */
    public long held() {
        return held.get();
    }

    /** Bytes lent ahead of their arrival, all requests together. */
    public long lent() {
        return lent.get();
    }

    /** A reservation of zero bytes that grows with its body; release it with {@link Reservation#close()}. */
    public Reservation open() {
        return new Reservation();
    }

    /** One request's share; not thread-safe (one body is read by one thread at a time). */
    public final class Reservation implements AutoCloseable {

        private long bytes;
        private long ahead;
        private boolean closed;

        private Reservation() {}

        /**
         * Adds {@code more} bytes to this reservation.
         *
         * @throws OverloadedException when the budget is spent (503 with Retry-After in REST)
         */
        public void grow(long more) {
            if (closed) {
                throw new IllegalStateException("reservation already released");
            }
            long now = held.addAndGet(more);
            if (now > maxBytes) {
                held.addAndGet(-more);
                throw new OverloadedException("too many request bytes in flight (limit " + maxBytes + "); retry later",
                        RETRY_AFTER);
            }
            bytes += more;
            long arrived = Math.min(more, ahead);
            if (arrived > 0) {
                ahead -= arrived;
                lent.addAndGet(-arrived);
            }
        }

        /**
         * Lends room for {@code more} bytes that have not arrived, when held and lent bytes
         * together leave it; {@link #grow} then moves them from lent to held as they arrive.
         *
         * @return false when the budget has not that much room (nothing is lent then)
         */
        public boolean presize(long more) {
            if (closed || more <= 0) {
                return false;
            }
            if (lent.addAndGet(more) + held.get() > maxBytes) {
                lent.addAndGet(-more);
                return false;
            }
            ahead += more;
            return true;
        }

        public long bytes() {
            return bytes;
        }

        /** Idempotent: the filter and an error path may both release. */
        @Override
        public void close() {
            if (!closed) {
                closed = true;
                held.addAndGet(-bytes);
                lent.addAndGet(-ahead);
                bytes = 0;
                ahead = 0;
            }
        }
    }
}
