package io.etserve.execution;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A log throttle for what could otherwise be said at every call: {@link #now} answers true at
 * most once a minute, the first time at once, whatever the threads asking.
 */
public final class OncePerMinute {

    private static final long INTERVAL_NANOS = 60_000_000_000L;

    private final AtomicLong last = new AtomicLong(System.nanoTime() - INTERVAL_NANOS - 1);

    /** Whether to say it now: nothing was said within the minute, and no other thread says it. */
    public boolean now() {
        long now = System.nanoTime();
        long previous = last.get();
        return now - previous > INTERVAL_NANOS && last.compareAndSet(previous, now);
    }
}
