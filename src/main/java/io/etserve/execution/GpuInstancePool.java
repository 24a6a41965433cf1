package io.etserve.execution;

import io.etserve.cuda.LeaseQueue;
import io.etserve.cuda.QueuePolicy;
import io.etserve.cuda.StreamLease;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPoolExhaustedException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.etserve.runtime.ProgramInstance;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * A model's instances on one device. Instances and streams are separate resources: the
 * instances (Modules, each holding its delegates' device memory) belong to this model; the
 * streams belong to the device's pool, shared by every model placed there. A call takes a free
 * instance, then leases a stream on the same device, and gives both back when it is done.
 * Both waits hand a freed resource straight to the next caller ({@link LeaseQueue}, with the
 * device's sleep slice): the instance line in the {@link QueuePolicy}'s order, the stream line
 * first come, first served (its waiters already hold an instance).
 */
public final class GpuInstancePool implements InstancePool {

    private final StreamPool streams;
    private final List<ProgramInstance> instances;
    private final LeaseQueue idle;

    public GpuInstancePool(StreamPool streams, List<ProgramInstance> instances) {
        this(streams, instances, QueuePolicy.DEFAULT);
    }

    public GpuInstancePool(StreamPool streams, List<ProgramInstance> instances, QueuePolicy order) {
        if (instances.isEmpty()) {
            throw new IllegalArgumentException("a GPU instance pool needs at least one instance");
        }
        this.streams = streams;
        this.instances = List.copyOf(instances);
        this.idle = new LeaseQueue(instances.size(), streams.sleepSliceMicros() * 1000L, order);
    }

    @Override
    public ExecutionSlot acquire(Duration timeout) throws InterruptedException {
        return acquire(timeout, LeaseQueue.Abandon.NEVER);
    }

    /** The wait for an instance can be abandoned; the stream's, shared and short, is bounded only. */
    @Override
    public ExecutionSlot acquire(Duration timeout, LeaseQueue.Abandon abandon) throws InterruptedException {
        unavailableReason().ifPresent(reason -> {
            throw new ModelUnavailableException(reason);
        });
        long deadline = System.nanoTime() + timeout.toNanos();
        int index = idle.take(timeout.toNanos(), abandon);
        if (index < 0) {
            if (abandon.abandoned()) {
                return null;
            }
            throw new OverloadedException("all " + instances.size() + " instances on " + placement() + " are busy",
                    timeout);
        }
        ProgramInstance instance = instances.get(index);
        StreamLease lease;
        try {
            // Whatever is left of the caller's wait: the stream pool is shared with other models.
            lease = streams.lease(Duration.ofNanos(Math.max(0, deadline - System.nanoTime())));
        } catch (StreamPoolExhaustedException e) {
            idle.giveBack(index);
            throw new OverloadedException(e.getMessage(), timeout);
        } catch (IllegalStateException e) {
            idle.giveBack(index);
            throw new ModelUnavailableException(e.getMessage());
        } catch (InterruptedException | RuntimeException e) {
            idle.giveBack(index);
            throw e;
        }
        return new ExecutionSlot(instance, lease.selection(), () -> {
            try {
                if (instance.leftGpuWorkRunning()) {
                    // Its call gave up on GPU work that may never end: the device is taken as hung
                    // before the stream goes back, so giving it back does not wait for that work.
                    streams.markHung("a call's GPU work on device " + streams.device()
                            + " did not complete within etserve.cuda.completion-timeout");
                }
                lease.close();
            } finally {
                idle.give(index);
            }
        });
    }

    /** Tries once without waiting; empty when no instance or no stream is free right now. */
    Optional<ExecutionSlot> tryAcquire() throws InterruptedException {
        try {
            return Optional.of(acquire(Duration.ZERO));
        } catch (OverloadedException busy) {
            return Optional.empty();
        }
    }

    @Override
    public int capacity() {
        return instances.size();
    }

    @Override
    public String placement() {
        return "cuda:" + streams.device();
    }

    @Override
    public Optional<String> unavailableReason() {
        return streams.fault().map(f -> "device " + streams.device() + " is faulted: " + f);
    }

    /**
     * Frees the instances, except on a device taken as hung: freeing device memory waits for the
     * device's work, which there may never complete (a call that gave up waiting for it), and the
     * process is restarted anyway. (On a device with a sticky fault freeing fails at once.)
     */
    @Override
    public void close() {
        if (streams.hung()) {
            return;
        }
        instances.forEach(ProgramInstance::close);
    }
}
