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
     * A caller that gives up leaves within one poll of the device it waits on ({@code POLL}, or
     * what is left of {@code timeout} when less). Each pass asks every device at once and waits on
     * the last one in turn that is not faulted, so a faulted device never turns the wait into a
     * spin. The caller is watched ({@link LeaseQueue.Abandon#watching}) once it has waited as long
     * in all as one device's line would have let it wait, though no single poll lasts that long. A
     * zero timeout asks each device once and never waits: a caller that may not wait
     * ({@link io.etserve.inference.Caller#AT_ONCE}) runs on an I/O thread.
     */
    @Override
    public ExecutionSlot acquire(Duration timeout, LeaseQueue.Abandon abandon) throws InterruptedException {
        long begin = System.nanoTime();
        long deadline = begin + timeout.toNanos();
        LeaseQueue.Abandon overall = new SinceStart(abandon, begin);
        int start = Math.floorMod(next.getAndIncrement(), devices.size());
        List<String> faults = new ArrayList<>();
        do {
            faults.clear();
            int waitOn = lastHealthy(start);
            for (int i = 0; i < devices.size(); i++) {
                if (abandon.abandoned()) {
                    return null;
                }
                int index = (start + i) % devices.size();
                GpuInstancePool pool = devices.get(index);
                try {
                    Duration wait = index != waitOn ? Duration.ZERO
                            : Duration.ofNanos(Math.min(POLL.toNanos(), Math.max(0, deadline - System.nanoTime())));
                    ExecutionSlot slot = pool.acquire(wait, overall);
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

    /** The last device in this caller's turn, from {@code start}, whose streams are not faulted (-1: none). */
    private int lastHealthy(int start) {
        for (int i = devices.size() - 1; i >= 0; i--) {
            int index = (start + i) % devices.size();
            if (devices.get(index).unavailableReason().isEmpty()) {
                return index;
            }
        }
        return -1;
    }

    /**
     * The caller's {@link LeaseQueue.Abandon} for one device's line, its watch delay counted from
     * the start of the whole acquire rather than from that line's own (short) wait.
     */
    private record SinceStart(LeaseQueue.Abandon caller, long begin) implements LeaseQueue.Abandon {

        @Override
        public long watchAfterNanos() {
            return Math.max(0, begin + caller.watchAfterNanos() - System.nanoTime());
        }

        @Override
        public void watching(Thread waiter) {
            caller.watching(waiter);
        }

        @Override
        public boolean abandoned() {
            return caller.abandoned();
        }

        @Override
        public boolean expired(long now) {
            return caller.expired(now);
        }
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
