package io.etserve.execution;

import io.etserve.cuda.LeaseQueue;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

/**
 * A model's instances on several devices: each call goes to a device with a free instance (and a
 * free stream there), starting from the next one in turn. A device whose stream pool is faulted is skipped, so a
 * device-scoped fault takes out only that device's instances.
 */
public final class MultiDeviceInstancePool implements InstancePool {

    private static final Duration POLL = Duration.ofMillis(2);

    private final List<GpuInstancePool> devices;
    private final AtomicInteger next = new AtomicInteger();

    public MultiDeviceInstancePool(List<GpuInstancePool> devices) {
        this.devices = List.copyOf(devices);
    }

    @Override
    public ExecutionSlot acquire(Duration timeout) throws InterruptedException {
        return acquire(timeout, LeaseQueue.Abandon.NEVER);
    }

    /**
     * A caller that gives up leaves within one poll of the last device ({@code POLL}, or what is
     * left of {@code timeout} when less). A zero timeout asks each device once and never waits:
     * a caller that may not wait ({@link io.etserve.inference.Caller#AT_ONCE}) runs on an I/O
     * thread.
     */
    @Override
    public ExecutionSlot acquire(Duration timeout, LeaseQueue.Abandon abandon) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        int start = Math.floorMod(next.getAndIncrement(), devices.size());
        List<String> faults = new ArrayList<>();
        do {
            faults.clear();
            for (int i = 0; i < devices.size(); i++) {
                if (abandon.abandoned()) {
                    return null;
                }
                GpuInstancePool pool = devices.get((start + i) % devices.size());
                try {
                    Duration wait = i < devices.size() - 1 ? Duration.ZERO
                            : Duration.ofNanos(Math.min(POLL.toNanos(), Math.max(0, deadline - System.nanoTime())));
                    ExecutionSlot slot = pool.acquire(wait, abandon);
                    if (slot != null) {
                        return slot;
                    }
                } catch (OverloadedException busy) {
                    // try the next device
                } catch (ModelUnavailableException faulted) {
                    faults.add(faulted.getMessage());
                }
            }
            if (faults.size() == devices.size()) {
                throw new ModelUnavailableException("every device of this model is faulted: " + faults);
            }
        } while (System.nanoTime() < deadline);
        throw new OverloadedException("all " + capacity() + " instances on " + placement() + " are busy or their streams are", timeout);
    }

    @Override
    public Optional<String> unavailableReason() {
        List<String> reasons = new ArrayList<>();
        for (GpuInstancePool d : devices) {
            if (d.unavailableReason().isEmpty()) {
                return Optional.empty();
            }
            reasons.add(d.unavailableReason().get());
        }
        return Optional.of(String.join("; ", reasons));
    }

    @Override
    public int capacity() {
        return devices.stream().mapToInt(GpuInstancePool::capacity).sum();
    }

    @Override
    public String placement() {
        return devices.stream().map(GpuInstancePool::placement).collect(Collectors.joining(","));
    }

    @Override
    public void close() {
        devices.forEach(GpuInstancePool::close);
    }
}
