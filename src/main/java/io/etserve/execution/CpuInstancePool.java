package io.etserve.execution;

import io.etserve.cuda.LeaseQueue;
import io.etserve.cuda.QueuePolicy;
import io.etserve.inference.OverloadedException;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.List;

/**
 * CPU instances: a fixed set of Modules over one Program, no stream guard. Callers wait for one
 * in line ({@link LeaseQueue}, parked until served, in the {@link QueuePolicy}'s order), and a
 * caller that gives up leaves the line.
 */
public final class CpuInstancePool implements InstancePool {

    private final List<ProgramInstance> instances;
    private final LeaseQueue idle;

    public CpuInstancePool(List<ProgramInstance> instances) {
        this(instances, QueuePolicy.DEFAULT);
    }

    public CpuInstancePool(List<ProgramInstance> instances, QueuePolicy order) {
        this.instances = List.copyOf(instances);
        this.idle = new LeaseQueue(instances.size(), 0, order);
    }

    @Override
    public ExecutionSlot acquire(Duration timeout) throws InterruptedException {
        return acquire(timeout, LeaseQueue.Abandon.NEVER);
    }

    @Override
    public ExecutionSlot acquire(Duration timeout, LeaseQueue.Abandon abandon) throws InterruptedException {
        int index = idle.take(timeout.toNanos(), abandon);
        if (index < 0) {
            if (abandon.abandoned()) {
                return null;
            }
            throw new OverloadedException("all " + instances.size() + " instances are busy", timeout);
        }
        return new ExecutionSlot(instances.get(index), StreamSelection.none(), () -> idle.give(index));
    }

    @Override
    public boolean idleNow() {
        return idle.freeCount() > 0 && idle.waitingCount() == 0;
    }

    @Override
    public int capacity() {
        return instances.size();
    }

    @Override
    public String placement() {
        return "cpu";
    }

    @Override
    public void close() {
        instances.forEach(ProgramInstance::close);
    }
}
