package io.etserve.runtime;

/**
 * How an instance's adaptive completion waits ended (native/src/completion_wait.h), one count per
 * {@link Ended} value under its name (the C++ counters and the metric's {@code ended} label read
 * the same): complete at the first query, complete when the sleep or a slice of it ended (it
 * overslept), seen by the short spin after the sleep (the aim), or seen only while backing off
 * (a long tail). Read with {@link ProgramInstance#stats()}; the bridge builds it with the
 * canonical constructor.
 *
 * @param lastWaitEndNanos when the last call's wait (any kind, failed ones too) returned, on
 *     {@link System#nanoTime()}'s clock (CLOCK_MONOTONIC), or 0 before the first
 */
public record CompletionWaits(long atStart, long overslept, long inSpin, long inBackoff, long lastWaitEndNanos) {

    /** How one adaptive wait ended. Order matters: the bridge reports the ordinal (C++ {@code Ended}). */
    public enum Ended {
        /** The call did not wait adaptively (no GPU wait, another kind of wait, or it failed). */
        NONE,
        /** Complete at the first query: the work was tiny or the delegate synchronized itself. */
        AT_START,
        /** Complete when the sleep (or, with a sleep slice, a slice of it) ended: it slept past the completion. */
        OVERSLEPT,
        /** Seen by the short spin after the sleep: what the wait aims at. */
        IN_SPIN,
        /** Seen only while backing off: the work took longer than learned. */
        IN_BACKOFF;

        /** values() copies its array at every call: once per forward call here. */
        private static final Ended[] ALL = values();

        static Ended ofNative(int code) {
            return code >= 0 && code < ALL.length ? ALL[code] : NONE;
        }
    }

    public long total() {
        return atStart + overslept + inSpin + inBackoff;
    }

    /** The counts since {@code earlier}. */
    public CompletionWaits since(CompletionWaits earlier) {
        return new CompletionWaits(atStart - earlier.atStart, overslept - earlier.overslept,
                inSpin - earlier.inSpin, inBackoff - earlier.inBackoff, lastWaitEndNanos);
    }
}
