package io.etserve.inference;

import java.util.OptionalLong;

/**
 * Whoever waits for a request's answer, as its protocol sees them: whether they are gone (an
 * HTTP client that closed its connection, a cancelled gRPC call) and when they stop waiting (a
 * gRPC deadline). The inference path watches a caller only while its request waits for an
 * instance or a batch (and then until the request ends), so a request that runs at once costs
 * its protocol nothing.
 */
public interface Caller {

    /** A caller that never goes and sets no deadline: in-process callers (benchmarks, tests). */
    Caller STAYS = gone -> () -> {};

    /**
     * A caller on a thread that serves other connections too (Jetty's selector): it stays, and its
     * request runs only on an instance free now; otherwise the request ends in
     * {@link WouldWaitException} for its transport to hand to a thread that may wait.
     */
    Caller AT_ONCE = new Caller() {
        @Override
        public Watch watch(Runnable gone) {
            return () -> {};
        }

        @Override
        public boolean mayWait() {
            return false;
        }
    };

    /**
     * Starts watching: {@code gone} runs once, on any thread (possibly this one, at once), if the
     * caller goes before the returned watch is closed.
     */
    Watch watch(Runnable gone);

    /** True once the caller is known to be gone without watching (a cancelled gRPC call); false when unknown. */
    default boolean hasLeft() {
        return false;
    }

    /** Whether its request may wait for an instance (false: {@link #AT_ONCE}). */
    default boolean mayWait() {
        return true;
    }

    /** When the caller stops waiting ({@link System#nanoTime()}), if it said (a gRPC deadline). */
    default OptionalLong deadlineNanos() {
        return OptionalLong.empty();
    }

    /** Stops a {@link #watch}; idempotent. */
    interface Watch extends AutoCloseable {
        @Override
        void close();
    }
}
