package io.etserve.cuda;

import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/** The stream pools of every served device (none on a CPU-only node). */
public final class StreamPools implements AutoCloseable {

    private final Map<Integer, StreamPool> byDevice;
    private final String why;
    private final Duration drainTimeout;

    public StreamPools(Map<Integer, StreamPool> byDevice, String whyNone, Duration drainTimeout) {
        this.byDevice = new TreeMap<>(byDevice);
        this.why = whyNone;
        this.drainTimeout = drainTimeout;
    }

    public static StreamPools none(String why) {
        return new StreamPools(Map.of(), why, Duration.ZERO);
    }

    public boolean isEmpty() {
        return byDevice.isEmpty();
    }

    /** Why there are no pools (no driver, no device, CUDA disabled), when there are none. */
    public Optional<String> whyNone() {
        return isEmpty() ? Optional.ofNullable(why) : Optional.empty();
    }

    public Collection<StreamPool> all() {
        return byDevice.values();
    }

    public Optional<StreamPool> forDevice(int device) {
        return Optional.ofNullable(byDevice.get(device));
    }

    /** The device models go to unless placed elsewhere: the lowest served ordinal. */
    public Optional<StreamPool> defaultPool() {
        return byDevice.values().stream().findFirst();
    }

    @Override
    public void close() {
        byDevice.values().forEach(p -> p.close(drainTimeout));
    }
}
