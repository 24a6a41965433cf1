package io.etserve.cuda;

import org.bytedeco.cuda.global.cudart;

/**
 * How a host thread waits inside a synchronous CUDA call (a delegate's own
 * {@code cudaStreamSynchronize}, the device-to-host copy at a CUDA partition's end): CUDA's
 * device schedule flags. The service's own completion wait polls an event and is not affected.
 */
public enum DeviceSchedule {
    /** CUDA's choice: spins while the host has more cores than devices (a whole core per waiting call). */
    AUTO,
    /** Spin: the lowest wake-up latency, the wait's full duration in CPU. */
    SPIN,
    /** Spin, yielding the core between checks. */
    YIELD,
    /** Block on an OS primitive: almost no CPU while waiting, a wake-up latency of tens of microseconds. */
    BLOCKING_SYNC;

    int flag() {
        return switch (this) {
            case AUTO -> cudart.cudaDeviceScheduleAuto;
            case SPIN -> cudart.cudaDeviceScheduleSpin;
            case YIELD -> cudart.cudaDeviceScheduleYield;
            case BLOCKING_SYNC -> cudart.cudaDeviceScheduleBlockingSync;
        };
    }
}
