package io.etserve.inference;

import io.etserve.cuda.StreamLease;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPoolExhaustedException;
import io.etserve.runtime.ProgramInstance;
import java.time.Duration;
import java.util.List;

/**
 * GPU instances: one Module per stream slot of the device's pool. Leasing a stream leases
 * the Module bound to its slot, so a Module only ever runs on its one stream, one call at a time.
 */
public final class StreamInstancePool implements InstancePool {

    private final StreamPool streams;
    private final List<ProgramInstance> bySlot;

    public StreamInstancePool(StreamPool streams, List<ProgramInstance> bySlot) {
        if (bySlot.size() != streams.size()) {
            throw new IllegalArgumentException("one instance per stream slot");
        }
        this.streams = streams;
        this.bySlot = List.copyOf(bySlot);
    }

    @Override
    public ExecutionSlot acquire(Duration timeout) throws InterruptedException {
        StreamLease lease;
        try {
            lease = streams.lease(timeout);
        } catch (StreamPoolExhaustedException e) {
            throw new OverloadedException(e.getMessage(), timeout);
        } catch (IllegalStateException e) {
            throw new ModelUnavailableException(e.getMessage());
        }
        return new ExecutionSlot(bySlot.get(lease.slot()), lease.selection(), lease::close);
    }

    @Override
    public int capacity() {
        return streams.size();
    }

    @Override
    public String placement() {
        return "cuda:" + streams.device();
    }

    @Override
    public java.util.Optional<String> unavailableReason() {
        return streams.fault().map(f -> "device " + streams.device() + " is faulted: " + f);
    }

    public int device() {
        return streams.device();
    }

    @Override
    public void close() {
        bySlot.forEach(ProgramInstance::close);
    }
}
