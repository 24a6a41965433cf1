package io.etserve.inference;

import io.etserve.cuda.StreamLease;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPoolExhaustedException;
import io.etserve.runtime.ProgramInstance;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A model's instances on one device. Instances and streams are separate resources: the
 * instances (Modules, each holding its delegates' device memory) belong to this model; the
 * streams belong to the device's pool, shared by every model placed there. A call takes a free
 * instance, then leases a stream on the same device, and gives both back when it is done.
 */
public final class GpuInstancePool implements InstancePool {

    private final StreamPool streams;
    private final List<ProgramInstance> instances;
    private final BlockingQueue<ProgramInstance> idle;

    public GpuInstancePool(StreamPool streams, List<ProgramInstance> instances) {
        if (instances.isEmpty()) {
            throw new IllegalArgumentException("a GPU instance pool needs at least one instance");
        }
        this.streams = streams;
        this.instances = List.copyOf(instances);
        this.idle = new ArrayBlockingQueue<>(instances.size(), true, instances);
    }

    @Override
    public ExecutionSlot acquire(Duration timeout) throws InterruptedException {
        unavailableReason().ifPresent(reason -> {
            throw new ModelUnavailableException(reason);
        });
        long deadline = System.nanoTime() + timeout.toNanos();
        ProgramInstance instance = idle.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
        if (instance == null) {
            throw new OverloadedException("all " + instances.size() + " instances on " + placement() + " are busy",
                    timeout);
        }
        StreamLease lease;
        try {
            // Whatever is left of the caller's wait: the stream pool is shared with other models.
            lease = streams.lease(Duration.ofNanos(Math.max(0, deadline - System.nanoTime())));
        } catch (StreamPoolExhaustedException e) {
            idle.add(instance);
            throw new OverloadedException(e.getMessage(), timeout);
        } catch (IllegalStateException e) {
            idle.add(instance);
            throw new ModelUnavailableException(e.getMessage());
        } catch (InterruptedException | RuntimeException e) {
            idle.add(instance);
            throw e;
        }
        return new ExecutionSlot(instance, lease.selection(), () -> {
            try {
                lease.close();
            } finally {
                idle.add(instance);
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

    public int device() {
        return streams.device();
    }

    @Override
    public void close() {
        instances.forEach(ProgramInstance::close);
    }
}
