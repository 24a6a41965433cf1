package io.etserve.config;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamPools;
import io.etserve.cuda.TensorRtProbe;
import io.etserve.execution.InferenceService;
import io.etserve.health.CallerStreamCheck;
import io.etserve.health.CallerStreamHealthIndicator;
import io.etserve.health.CudaFaultMonitor;
import io.etserve.health.CudaHealthIndicator;
import io.etserve.health.ModelsHealthIndicator;
import io.etserve.health.ProbeHealth;
import io.etserve.health.ProbeWarmup;
import io.etserve.health.ServerReadiness;
import io.etserve.repository.ModelRegistry;
import io.etserve.runtime.NativeRuntime;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.endpoint.jackson.EndpointJsonMapper;
import org.springframework.boot.availability.ApplicationAvailability;
import org.springframework.boot.health.actuate.endpoint.HealthEndpoint;
import org.springframework.boot.health.actuate.endpoint.HealthEndpointGroups;
import org.springframework.boot.health.actuate.endpoint.HealthEndpointWebExtension;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Liveness and readiness ({@code etserve.health.*}): the startup check of the caller-stream
 * library, the monitor that takes liveness down on a sticky CUDA fault, and the indicators the
 * readiness group names in application.yml (the bean names give {@code models},
 * {@code callerStream} and {@code cuda}: keep them).
 */
@Configuration(proxyBeanMethods = false)
class HealthConfiguration {

    private static final Logger log = LoggerFactory.getLogger(HealthConfiguration.class);

    /** Runs once the bridge has loaded: it inspects the libraries loaded into the process. */
    @Bean
    CallerStreamCheck callerStreamCheck(NativeRuntime.Info nativeRuntime, EtServeProperties props) {
        CallerStreamCheck check = new CallerStreamCheck();
        CallerStreamCheck.Result r = check.check();
        if (r.ok()) {
            log.info(r.summary());
        } else if (props.health().failFastCallerStream()) {
            throw new IllegalStateException("Refusing to start: " + r.summary()
                    + " (set etserve.health.fail-fast-caller-stream=false to start anyway, reporting DOWN)");
        } else {
            log.error(r.summary());
        }
        return check;
    }

    @Bean
    CudaFaultMonitor cudaFaultMonitor(ApplicationEventPublisher events, StreamPools pools) {
        return new CudaFaultMonitor(events, pools);
    }

    @Bean
    ServerReadiness serverReadiness(ModelRegistry registry, ApplicationAvailability availability,
            CallerStreamCheck callerStream, EtServeProperties props) {
        return new ServerReadiness(registry, availability, callerStream, props.inference().strictReadiness());
    }

    @Bean
    ProbeHealth probeHealth(HealthEndpoint endpoint, HealthEndpointGroups groups) {
        return new ProbeHealth(endpoint, groups);
    }

    /**
     * The management port's probes (and {@code /actuator/health}) prepared during the start; nothing
     * to prepare where the health endpoint is not served over HTTP.
     */
    @Bean
    ProbeWarmup probeWarmup(ObjectProvider<HealthEndpointWebExtension> health, ObjectProvider<EndpointJsonMapper> json,
            EtServeProperties props) {
        HealthEndpointWebExtension web = health.getIfAvailable();
        EndpointJsonMapper mapper = json.getIfAvailable();
        return new ProbeWarmup(web, mapper, List.of("", ProbeHealth.READINESS, ProbeHealth.LIVENESS),
                props.health().warmProbes() && web != null && mapper != null);
    }

    @Bean
    CallerStreamHealthIndicator callerStreamHealthIndicator(CallerStreamCheck check) {
        return new CallerStreamHealthIndicator(check);
    }

    @Bean
    ModelsHealthIndicator modelsHealthIndicator(ModelRegistry registry, ServerReadiness readiness,
            InferenceService inference) {
        return new ModelsHealthIndicator(registry, readiness, inference);
    }

    @Bean
    CudaHealthIndicator cudaHealthIndicator(CudaRuntime cuda, StreamPools pools, TensorRtProbe tensorRt,
            CudaFaultMonitor faults) {
        return new CudaHealthIndicator(cuda, pools, tensorRt, faults);
    }
}
