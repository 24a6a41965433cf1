package io.etserve.execution;

/**
 * Calls that ran on a thread serving many connections (Netty's event loop, Jetty's selector)
 * because their model's recent calls were quick or ended soon ({@link InferenceService#runsAtOnce},
 * {@link InferenceService#endsSoon}), and that turned out long: each protocol tells its operator
 * what to set, at most once a minute.
 */
public final class SlowInlineCalls {

    /** A call this long held every connection its thread serves (unless the bound is longer). */
    private static final long SLOW_NANOS = 100_000_000L;

    private final long slowNanos;
    private final OncePerMinute reports = new OncePerMinute();

    /**
     * Reports calls over 100 ms or twice {@code boundNanos}, whichever is longer: calls may run
     * inline while their model's recent ones took under that bound.
     */
    public SlowInlineCalls(long boundNanos) {
        this.slowNanos = Math.max(SLOW_NANOS, 2 * boundNanos);
    }

    /** Whether a call that ran {@code nanos} is to be reported now: it was slow, and none was within the minute. */
    public boolean report(long nanos) {
        return nanos > slowNanos && reports.now();
    }
}
