package io.etserve.health;

import io.etserve.cuda.CudaException;
import io.etserve.runtime.ExecuTorchException;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.availability.AvailabilityChangeEvent;
import org.springframework.boot.availability.LivenessState;
import org.springframework.context.ApplicationEventPublisher;

/**
 * Watches runtime failures for sticky CUDA errors (illegal address, launch failure...): after
 * one, every later CUDA call in the process fails too, so the only cure is a restart. It marks
 * liveness BROKEN so Kubernetes restarts the pod, instead of staying green while every call fails.
 */
public final class CudaFaultMonitor implements Consumer<Throwable> {

    private static final Logger log = LoggerFactory.getLogger(CudaFaultMonitor.class);

    private final ApplicationEventPublisher events;
    private final AtomicReference<String> fault = new AtomicReference<>();

    public CudaFaultMonitor(ApplicationEventPublisher events) {
        this.events = events;
    }

    @Override
    public void accept(Throwable error) {
        String sticky = stickyFault(error);
        if (sticky != null && fault.compareAndSet(null, sticky)) {
            log.error("sticky CUDA fault, marking liveness BROKEN so the process is restarted: {}", sticky);
            AvailabilityChangeEvent.publish(events, this, LivenessState.BROKEN);
        }
    }

    public Optional<String> fault() {
        return Optional.ofNullable(fault.get());
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
