package io.etserve.cuda;

import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongConsumer;

/**
 * The streams of one device, leased one caller at a time with a bounded wait, first come,
 * first served ({@link LeaseQueue}, {@link QueuePolicy#FIFO}): its waiters already hold an
 * instance, and none of them leaves the line because its caller went.
 *
 * <p>A lease comes back only once its stream is idle (the pool synchronizes it on return),
 * so the next caller never inherits in-flight work. {@link #close()} stops new leases,
 * waits for the leased ones to drain, then destroys the streams.
 */
public final class StreamPool implements AutoCloseable {

    private final int device;
    private final StreamFactory factory;
    private final List<ComputeStream> streams;
    private final LeaseQueue idle;
    private volatile boolean hung;
    private final AtomicReference<String> fault = new AtomicReference<>();
    private final LongConsumer leaseWaitNanos;
    private volatile boolean closed;

    /**
     * @param leaseWaitNanos receives each successful lease's wait time (for metrics)
     */
    public StreamPool(int device, int size, int priority, StreamFactory factory, LongConsumer leaseWaitNanos) {
        if (size < 1) {
            throw new IllegalArgumentException("a stream pool needs at least one stream");
        }
        this.device = device;
        this.factory = factory;
        this.leaseWaitNanos = leaseWaitNanos;
        List<ComputeStream> created = new ArrayList<>(size);
        try {
            for (int i = 0; i < size; i++) {
                created.add(factory.create(device, priority));
            }
        } catch (RuntimeException e) {
            created.forEach(factory::destroy);
            throw e;
        }
        this.streams = List.copyOf(created);
        this.idle = new LeaseQueue(size, factory.sleepSliceMicros() * 1000L, QueuePolicy.FIFO);
    }

    public int device() {
        return device;
    }

    public int size() {
        return streams.size();
    }

    public int idleCount() {
        return idle.freeCount();
    }

    public int leasedCount() {
        return streams.size() - idle.freeCount();
    }

    public int waitingCount() {
        return idle.waitingCount();
    }

    public StreamSelection.Mode selectionMode() {
        return factory.selectionMode();
    }

    public StreamSelection.CompletionWait completionWait() {
        return factory.completionWait();
    }

    public int sleepSliceMicros() {
        return factory.sleepSliceMicros();
    }

    public int waitTimeoutMillis() {
        return factory.waitTimeoutMillis();
    }

    /** Stops this device's pool from leasing (a sticky fault of its context), keeping the first reason. */
    public void markFaulted(String reason) {
        fault.compareAndSet(null, reason);
    }

    /**
     * As {@link #markFaulted}, for a device whose work may never complete (a call gave up waiting
     * for it): nothing on it may be waited for again, freeing device memory included.
     */
    public void markHung(String reason) {
        hung = true;
        markFaulted(reason);
    }

    /** Whether work on this device may never complete ({@link #markHung}). */
    public boolean hung() {
        return hung;
    }

    /** Why the pool stopped leasing (a stream could not be synchronized), if it did. */
    public Optional<String> fault() {
        return Optional.ofNullable(fault.get());
    }

    /**
     * Leases a stream, waiting at most {@code timeout}.
     *
     * @throws StreamPoolExhaustedException when none became free in time
     * @throws IllegalStateException when the pool is closed or faulted
     */
    public StreamLease lease(Duration timeout) throws InterruptedException {
        ensureUsable();
        long start = System.nanoTime();
        int slot = idle.take(timeout.toNanos());
        if (slot < 0) {
            throw new StreamPoolExhaustedException(device, timeout);
        }
        if (closed || fault.get() != null) {
            idle.giveBack(slot);
            ensureUsable();
        }
        leaseWaitNanos.accept(System.nanoTime() - start);
        return new StreamLease(this, slot, streams.get(slot));
    }

    void release(StreamLease lease) {
        try {
            // Work queued by the forward call must be complete before anyone else sees the stream.
            // A faulted pool leases no more, and its streams may hold work that never completes (a
            // call that gave up waiting): synchronizing would hang the caller.
            if (fault.get() == null) {
                factory.synchronize(lease.stream());
            }
        } catch (RuntimeException e) {
            fault.compareAndSet(null, "stream " + lease.slot() + " of device " + device + ": " + e.getMessage());
            throw e;
        } finally {
            idle.give(lease.slot());
        }
    }

    private void ensureUsable() {
        if (closed) {
            throw new IllegalStateException("stream pool of device " + device + " is closed");
        }
        String f = fault.get();
        if (f != null) {
            throw new IllegalStateException("stream pool of device " + device + " is faulted: " + f);
        }
    }

    /** Stops leasing, waits up to {@code drain} for leased streams to return, destroys all. */
    public void close(Duration drain) {
        closed = true;
        long deadline = System.nanoTime() + drain.toNanos();
        while (idle.freeCount() < streams.size() && System.nanoTime() < deadline) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        if (idle.freeCount() < streams.size() || hung) {
            // Destroying a stream with work on it would free memory under running kernels (on a
            // faulted device, work may never complete): leak the streams rather than risk it; the
            // process is going away anyway.
            return;
        }
        for (ComputeStream s : streams) {
            try {
                factory.destroy(s);
            } catch (RuntimeException ignored) {
                // a sticky CUDA error: nothing left to release
            }
        }
    }

    @Override
    public void close() {
        close(Duration.ofSeconds(30));
    }
}
