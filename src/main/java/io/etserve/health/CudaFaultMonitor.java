package io.etserve.health;

import io.etserve.cuda.CudaException;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.execution.FaultListener;
import io.etserve.runtime.ExecuTorchException;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.availability.AvailabilityChangeEvent;
import org.springframework.boot.availability.LivenessState;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.ApplicationListener;

/**
 * Watches runtime failures for sticky CUDA errors (illegal address, launch failure...): after
 * one, every later call on that device's context fails too, so the only cure is a restart.
 *
 * <p>The faulted device's stream pool stops leasing, which takes out only that device's
 * instances (models placed on other devices keep serving). Once no served device is left, or
 * when the device is unknown, liveness goes BROKEN so Kubernetes restarts the pod, instead of
 * staying green while every call fails. A fault met while the application starts (a model's
 * warm-up calls) is stated again once it is ready: Spring Boot sets liveness CORRECT when the
 * start completes, over what was published before.
 */
public final class CudaFaultMonitor implements FaultListener, ApplicationListener<ApplicationReadyEvent> {

    private static final Logger log = LoggerFactory.getLogger(CudaFaultMonitor.class);

    private final ApplicationEventPublisher events;
    private final StreamPools pools;
    private final AtomicReference<String> fault = new AtomicReference<>();

    public CudaFaultMonitor(ApplicationEventPublisher events, StreamPools pools) {
        this.events = events;
        this.pools = pools;
    }

    /** A failure whose device is unknown. */
    public void accept(Throwable error) {
        onRuntimeFailure(OptionalInt.empty(), error);
    }

    @Override
    public void onRuntimeFailure(OptionalInt device, Throwable error) {
        String sticky = stickyFault(error);
        if (sticky == null) {
            return;
        }
        Optional<StreamPool> pool = device.isPresent() ? pools.forDevice(device.getAsInt()) : Optional.empty();
        if (pool.isPresent()) {
            log.error("sticky CUDA fault on device {}: its instances stop serving: {}", device.getAsInt(), sticky);
            if (leftGpuWorkRunning(error)) {
                pool.get().markHung(sticky);
            } else {
                pool.get().markFaulted(sticky);
            }
            if (pools.all().stream().anyMatch(p -> p.fault().isEmpty())) {
                return;
            }
        }
        if (fault.compareAndSet(null, sticky)) {
            log.error("sticky CUDA fault, marking liveness BROKEN so the process is restarted: {}", sticky);
            AvailabilityChangeEvent.publish(events, this, LivenessState.BROKEN);
        }
    }

    @Override
    public void onApplicationEvent(ApplicationReadyEvent started) {
        String sticky = fault.get();
        if (sticky != null) {
            log.error("a sticky CUDA fault met during the start, liveness stays BROKEN: {}", sticky);
            AvailabilityChangeEvent.publish(events, this, LivenessState.BROKEN);
        }
    }

    public Optional<String> fault() {
        return Optional.ofNullable(fault.get());
    }

    /** Whether a call in {@code error}'s chain gave up waiting for its GPU work (the completion timeout). */
    static boolean leftGpuWorkRunning(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            if (t instanceof ExecuTorchException e && e.leftGpuWorkRunning()) {
                return true;
            }
        }
        return false;
    }

    /** The description of a sticky CUDA error in {@code error}'s chain, or null. */
    static String stickyFault(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            if (t instanceof CudaException c && c.sticky()) {
                return c.getMessage();
            }
            if (t instanceof ExecuTorchException e && e.isCudaError() && CudaException.isStickyCode(e.errorCode())) {
                return e.getMessage();
            }
        }
        return null;
    }
}
