package io.etserve.execution;

import io.etserve.cuda.LeaseQueue;
import java.time.Duration;
import java.util.Optional;

/** The Modules of one model version, handed out one caller at a time. */
public interface InstancePool extends AutoCloseable {

    /**
     * Waits at most {@code timeout} for a free instance.
     *
     * @throws OverloadedException when none became free in time
     */
    ExecutionSlot acquire(Duration timeout) throws InterruptedException;

    /**
     * As {@link #acquire(Duration)}, but leaves the line as soon as {@code abandon} says the
     * caller gave up. A pool that cannot leave early waits as {@link #acquire(Duration)} does.
     *
     * @return the slot, or null when the caller gave up first
     * @throws OverloadedException when none became free in time
     */
    default ExecutionSlot acquire(Duration timeout, LeaseQueue.Abandon abandon) throws InterruptedException {
        return acquire(timeout);
    }

    /**
     * Whether a call would start at once and never wait on a device: an instance is free and
     * nobody waits for one (a CPU pool; pools that wait for a GPU say false). A hint, not a
     * reservation: another caller may take the instance first.
     */
    default boolean idleNow() {
        return false;
    }

    /** Concurrent calls this pool can run. */
    int capacity();

    /** Where the instances run, for metadata and health: "cpu" or "cuda:N". */
    String placement();

    /** Why no call can run now (every device of the model faulted), if so. */
    default Optional<String> unavailableReason() {
        return Optional.empty();
    }

    /** Frees every Module, waiting for running calls to finish. */
    @Override
    void close();
}
