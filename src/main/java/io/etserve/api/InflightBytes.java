package io.etserve.api;

import java.time.Duration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.springframework.http.HttpStatus;

/**
 * Bounds the request bytes held at once across all models. A body is read and decoded before
 * the model's bulkhead admits it, so without this a burst of large requests on a small model
 * could hold (threads x body size) of heap and direct memory.
 */
public final class InflightBytes {

    private static final int UNIT = 1024;
    private final Semaphore permits;
    private final int maxUnits;
    private final Duration wait;

    public InflightBytes(long maxBytes, Duration wait) {
        this.maxUnits = (int) Math.max(1, Math.min(Integer.MAX_VALUE, maxBytes / UNIT));
        this.permits = new Semaphore(maxUnits, true);
        this.wait = wait;
    }

    /** Held until closed. */
    public interface Reservation extends AutoCloseable {
        @Override
        void close();
    }

    /**
     * Reserves room for a body of {@code bytes}, waiting at most the queue timeout.
     *
     * @throws ApiException 503 with Retry-After when the room did not free up in time
     */
    public Reservation reserve(long bytes) {
        int units = (int) Math.min(maxUnits, Math.max(1, (bytes + UNIT - 1) / UNIT));
        try {
            if (!permits.tryAcquire(units, wait.toNanos(), TimeUnit.NANOSECONDS)) {
                throw new ApiException(HttpStatus.SERVICE_UNAVAILABLE,
                        "too many request bytes in flight; retry later", wait.plusSeconds(1));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ApiException(HttpStatus.SERVICE_UNAVAILABLE, "interrupted while waiting for request memory");
        }
        return () -> permits.release(units);
    }
}
