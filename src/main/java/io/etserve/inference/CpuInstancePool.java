package io.etserve.inference;

import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

/** CPU instances: a fixed set of Modules over one Program, no stream guard. */
public final class CpuInstancePool implements InstancePool {

    private final List<ProgramInstance> instances;
    private final BlockingQueue<ProgramInstance> idle;

    public CpuInstancePool(List<ProgramInstance> instances) {
        this.instances = List.copyOf(instances);
        this.idle = new ArrayBlockingQueue<>(instances.size(), true, instances);
    }

    @Override
    public ExecutionSlot acquire(Duration timeout) throws InterruptedException {
        ProgramInstance instance = idle.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
        if (instance == null) {
            throw new OverloadedException("all " + instances.size() + " instances are busy", timeout);
        }
        return new ExecutionSlot(instance, StreamSelection.none(), () -> idle.add(instance));
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
