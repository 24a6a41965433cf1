package io.etserve.runtime;

/**
 * How an instance's adaptive completion waits ended (native/src/completion_wait.h): complete at
 * the first query, complete when the sleep ended (it overslept), seen by the short spin after the
 * sleep (the aim), or seen only while backing off (a long tail).
 *
 * @param lastCompletionNanos when the last wait saw its work complete, on {@link System#nanoTime()}'s
 *     clock (CLOCK_MONOTONIC), or 0
 */
public record CompletionWaits(long doneAtStart, long overslept, long inSpin, long inBackoff, long lastCompletionNanos) {

    public long total() {
        return doneAtStart + overslept + inSpin + inBackoff;
    }

    /** The counts since {@code earlier}. */
    public CompletionWaits since(CompletionWaits earlier) {
        return new CompletionWaits(doneAtStart - earlier.doneAtStart, overslept - earlier.overslept,
                inSpin - earlier.inSpin, inBackoff - earlier.inBackoff, lastCompletionNanos);
    }
}
