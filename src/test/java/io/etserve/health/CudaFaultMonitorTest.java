package io.etserve.health;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.StreamPools;
import io.etserve.runtime.ExecuTorchException;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.availability.ApplicationAvailability;
import org.springframework.boot.availability.ApplicationAvailabilityBean;
import org.springframework.boot.availability.LivenessState;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** {@link CudaFaultMonitor} in a real application start, where Spring Boot itself sets liveness. */
class CudaFaultMonitorTest {

    static final ExecuTorchException ILLEGAL_ADDRESS = new ExecuTorchException("CudaError", 700,
            "cudaStreamSynchronize failed: cudaErrorIllegalAddress", "");

    /** A sticky fault met while the context is built, as a model's warm-up call meets one at load. */
    @Configuration(proxyBeanMethods = false)
    static class FaultDuringStart {
        @Bean
        ApplicationAvailabilityBean applicationAvailability() {
            return new ApplicationAvailabilityBean();
        }

        @Bean
        CudaFaultMonitor cudaFaultMonitor(ApplicationEventPublisher events) {
            return new CudaFaultMonitor(events, StreamPools.none("no devices in this test"));
        }

        @Bean
        Object warmup(CudaFaultMonitor faults) {
            faults.onRuntimeFailure(OptionalInt.empty(), ILLEGAL_ADDRESS);
            return "warmed";
        }
    }

    @Test
    void aCallThatGaveUpOnItsGpuWorkTakesItsDeviceAsHungAnotherStickyFaultAsFaulted() {
        io.etserve.support.OpaqueStreamFactory streams = new io.etserve.support.OpaqueStreamFactory(java.util.List.of(0, 1));
        io.etserve.cuda.StreamPool zero = new io.etserve.cuda.StreamPool(0, 1, 0, streams, n -> {});
        io.etserve.cuda.StreamPool one = new io.etserve.cuda.StreamPool(1, 1, 0, streams, n -> {});
        CudaFaultMonitor monitor = new CudaFaultMonitor(e -> {},
                new StreamPools(java.util.Map.of(0, zero, 1, one), null, java.time.Duration.ofSeconds(1)));
        monitor.onRuntimeFailure(OptionalInt.of(0), new ExecuTorchException("CudaError", 702,
                "the GPU work of 'forward' did not complete within 500 ms", ""));
        monitor.onRuntimeFailure(OptionalInt.of(1), ILLEGAL_ADDRESS);
        assertThat(zero.hung()).isTrue();
        assertThat(one.fault()).isPresent();
        assertThat(one.hung()).as("its work failed at once: freeing there does not wait").isFalse();
    }

    @Test
    void aStickyFaultMetDuringTheStartLeavesLivenessBrokenOnceStarted() {
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(FaultDuringStart.class)
                .web(WebApplicationType.NONE).properties("spring.config.name=cuda-fault-monitor-test").run()) {
            // Spring Boot publishes CORRECT when the start completes: the fault must outlive it.
            assertThat(context.getBean(ApplicationAvailability.class).getLivenessState()).isEqualTo(LivenessState.BROKEN);
            assertThat(context.getBean(CudaFaultMonitor.class).fault()).hasValueSatisfying(f -> assertThat(f)
                    .contains("cudaErrorIllegalAddress"));
        }
    }
}
