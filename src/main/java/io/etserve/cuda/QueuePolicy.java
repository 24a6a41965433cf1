package io.etserve.cuda;

import java.time.Duration;

/**
 * Which waiter a line serves next: one policy for every line a request waits in (the instance
 * line, {@link LeaseQueue}, and a batching model's queue, io.etserve.execution.DynamicBatcher).
 *
 * <p>{@link Order#FIFO}: first come, first served, always. {@link Order#ADAPTIVE_LIFO}: first
 * come, first served until the line is congested, then the newest waiter first (Facebook's
 * adaptive LIFO, "Fail at Scale", ACM Queue 13(10), 2015). A line longer than its callers'
 * patience has at its head the waiter closest to giving up: served in arrival order, each call
 * ends for a client that left during it and nobody gets an answer. Served newest first, each
 * call ends while its caller still waits, and the old waiters leave as their callers go (or at
 * the queue timeout).
 *
 * <p>Congested means that a caller gave up on this line (went away, or passed its deadline,
 * while it waited) within the last {@code giveUpWindow}, or, when {@code maxFifoWait} is not
 * zero, that the oldest waiter has waited longer than that. Patient callers never give up, so
 * a standing line of them (more closed-loop clients than instances) stays in arrival order and
 * fair; {@code maxFifoWait} is for clients whose leaving the server cannot see.
 *
 * @param giveUpWindow how long a line stays newest-first after a caller gave up on it
 * @param maxFifoWait the oldest waiter's wait past which the line is newest-first too; zero: never
 */
public record QueuePolicy(Order order, Duration giveUpWindow, Duration maxFifoWait) {

    public enum Order {
        /** Arrival order, always. */
        FIFO,
        /** Arrival order; newest first while the line is congested. */
        ADAPTIVE_LIFO
    }

    /** Arrival order, always: for lines nobody gives up on (a device's streams). */
    public static final QueuePolicy FIFO = new QueuePolicy(Order.FIFO, Duration.ZERO, Duration.ZERO);

    /** The service's default (application.yml): newest first for a second after a caller gave up. */
    public static final QueuePolicy DEFAULT = new QueuePolicy(Order.ADAPTIVE_LIFO, Duration.ofSeconds(1),
            Duration.ZERO);

    public QueuePolicy {
        if (order == null) {
            throw new IllegalArgumentException("a queue policy needs an order (fifo or adaptive-lifo)");
        }
        if (giveUpWindow.isNegative() || maxFifoWait.isNegative()) {
            throw new IllegalArgumentException("give-up-window and max-fifo-wait must not be negative");
        }
    }

    /** A new line's state under this policy. */
    public Line newLine() {
        return new Line(this);
    }

    /**
     * One line's state: when a caller last gave up on it. Not thread-safe: the line uses it under
     * its own lock. Times are {@link System#nanoTime()} values, given by the caller.
     */
    public static final class Line {
        private final boolean adaptive;
        private final long windowNanos;
        private final long maxFifoWaitNanos;
        private boolean anyGaveUp;
        private long lastGaveUp;

        private Line(QueuePolicy policy) {
            this.adaptive = policy.order == Order.ADAPTIVE_LIFO;
            this.windowNanos = policy.giveUpWindow.toNanos();
            this.maxFifoWaitNanos = policy.maxFifoWait.toNanos();
        }

        /** A waiter left unserved because its caller gave up on it: it went away, or its deadline passed. */
        public void callerGaveUp(long now) {
            anyGaveUp = true;
            lastGaveUp = now;
        }

        /**
         * Whether the next waiter served is the newest rather than the oldest.
         *
         * @param oldestSince when the line's oldest waiter joined it
         */
        public boolean newestFirst(long now, long oldestSince) {
            if (!adaptive) {
                return false;
            }
            // Differences only: nanoTime may be negative.
            return (anyGaveUp && now - lastGaveUp < windowNanos)
                    || (maxFifoWaitNanos > 0 && now - oldestSince > maxFifoWaitNanos);
        }
    }
}
