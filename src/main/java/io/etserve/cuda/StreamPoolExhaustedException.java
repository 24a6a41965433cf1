package io.etserve.cuda;

import java.time.Duration;

/** No stream became free within the lease timeout: the caller answers "unavailable, retry". */
public class StreamPoolExhaustedException extends RuntimeException {
    public StreamPoolExhaustedException(int device, Duration waited) {
        super("all CUDA streams of device " + device + " are busy (waited " + waited.toMillis() + " ms)");
    }
}
