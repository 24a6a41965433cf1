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
import io.etserve.health.ServerReadiness;
import io.etserve.metrics.StreamPoolMetrics;
import io.etserve.metrics.TritonMetrics;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.protocol.InferResponseEncoder;
import io.etserve.repository.DevicePlacement;
import io.etserve.repository.ModelLoader;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.NodeCapabilities;
import io.etserve.resilience.ResilientAdmission;
import io.etserve.rest.InferenceProtocolController;
import io.etserve.rest.InflightBytes;
import io.etserve.runtime.Program;
import io.github.resilience4j.bulkhead.BulkheadRegistry;
import io.github.resilience4j.circuitbreaker.CircuitBreakerRegistry;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.HashSet;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.availability.ApplicationAvailability;
import org.springframework.boot.health.actuate.endpoint.HealthEndpoint;
import org.springframework.boot.health.actuate.endpoint.HealthEndpointGroups;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** Models, inference, the protocol endpoint, health and metrics. */
@Configuration(proxyBeanMethods = false)
public class ServingConfiguration {

    @Bean(initMethod = "loadAll", destroyMethod = "close")
    ModelRegistry modelRegistry(EtServeProperties props, StreamPools pools, NodeCapabilities node,
            CallerStreamCheck callerStreamChecked, TritonMetrics metrics) {
        // Both bound as enums: a misspelt value stops startup naming the property and its values.
        Program.Verification verification = props.nativeRuntime().verification();
        DevicePlacement.Policy placement = props.cuda().placement();
        // Warm-up files are request bodies: read by the REST decoder, within the same limits.
        DecodeLimits limits = new DecodeLimits(props.inference().maxElementsPerTensor(), props.inference().maxInputs());
        InferRequestDecoder decoder = new InferRequestDecoder();
        ModelLoader loader = new ModelLoader(verification, pools, node,
                new ModelLoader.Instances(props.inference().defaultInstances(), props.cuda().defaultInstances()),
                new HashSet<>(props.cuda().gpuBackends()), props.inference().maxElementsPerTensor(), placement,
                new ModelLoader.PlannedMemoryLimits(props.inference().maxPlannedMemory().toBytes(),
                        props.inference().maxPlannedMemoryPerModel().toBytes()), props.repository().copies(),
                props.inference().queuePolicy().policy(), body -> decoder.decode(body, null, limits));
        if (verification == Program.Verification.MINIMAL) {
            org.slf4j.LoggerFactory.getLogger(ModelLoader.class).info("etserve.native.verification=minimal applies "
                    + "only to programs whose declared sha256 matches; the others are verified fully");
        }
        ModelRegistry registry = new ModelRegistry(props.modelRepository(), loader, metrics);
        registry.setDrainTimeout(props.repository().drainTimeout());
        registry.setUnreleasedDeviceMemory(
                new io.etserve.repository.UnreleasedDeviceMemory(props.repository().unreleasedDeviceMemory()));
        return registry;
    }

    @Bean
    io.etserve.repository.RepositoryControl repositoryControl(ModelRegistry registry, EtServeProperties props) {
        return new io.etserve.repository.RepositoryControl(registry, props.repository().mode());
    }

    @Bean
    io.etserve.rest.RepositoryController repositoryController(io.etserve.repository.RepositoryControl repository,
            io.etserve.protocol.PublicMessages messages, io.etserve.triton.TritonExtensions triton) {
        return new io.etserve.rest.RepositoryController(repository, messages, triton);
    }

    /** etserve.repository.mode=poll: what changes on disk loads, reloads or unloads. */
    @Bean
    @org.springframework.boot.autoconfigure.condition.ConditionalOnProperty(name = "etserve.repository.mode",
            havingValue = "poll")
    io.etserve.repository.RepositoryPoller repositoryPoller(ModelRegistry registry, EtServeProperties props) {
        return new io.etserve.repository.RepositoryPoller(registry, props.repository().pollInterval());
    }

    @Bean
    io.etserve.metrics.ProtocolMetrics protocolMetrics(MeterRegistry meters, ModelRegistry registry) {
        return new io.etserve.metrics.ProtocolMetrics(meters, registry::knows);
    }

    @Bean
    TritonMetrics tritonMetrics(MeterRegistry meters) {
        return new TritonMetrics(meters);
    }

    @Bean
    StreamPoolMetrics streamPoolMetrics(StreamPools pools, CudaRuntime cuda) {
        return new StreamPoolMetrics(pools, cuda);
    }

    @Bean
    CudaFaultMonitor cudaFaultMonitor(ApplicationEventPublisher events, StreamPools pools) {
        return new CudaFaultMonitor(events, pools);
    }

    @Bean
    ResilientAdmission modelAdmission(ObjectProvider<BulkheadRegistry> bulkheads,
            ObjectProvider<CircuitBreakerRegistry> breakers, EtServeProperties props) {
        return new ResilientAdmission(bulkheads.getIfAvailable(BulkheadRegistry::ofDefaults),
                breakers.getIfAvailable(CircuitBreakerRegistry::ofDefaults), props.inference().queueTimeout());
    }

    @Bean
    InferenceService inferenceService(ModelRegistry registry, EtServeProperties props, TritonMetrics metrics,
            ResilientAdmission admission, CudaFaultMonitor faults, io.etserve.runtime.DirectBufferPool tensorBuffers,
            ObjectProvider<io.etserve.execution.InferenceSpans> spans) {
        return new InferenceService(registry, props.inference().queueTimeout(), metrics, admission, faults,
                tensorBuffers, spans.getIfAvailable(() -> io.etserve.execution.InferenceSpans.OFF));
    }

    @Bean
    ServerReadiness serverReadiness(ModelRegistry registry, ApplicationAvailability availability,
            CallerStreamCheck callerStream, EtServeProperties props) {
        return new ServerReadiness(registry, availability, callerStream, props.inference().strictReadiness());
    }

    @Bean
    InferenceProtocolController inferenceProtocolController(ModelRegistry registry, InferenceService inference,
            ServerReadiness readiness, ProbeHealth probes, EtServeProperties props, InflightBytes inflight,
            io.etserve.runtime.DirectBufferPool tensorBuffers, io.etserve.protocol.PublicMessages messages,
            io.etserve.rest.ClientConnections clients) {
        String version = InferenceProtocolController.class.getPackage().getImplementationVersion();
        return new InferenceProtocolController(registry, inference, readiness, probes, new InferRequestDecoder(),
                new InferResponseEncoder(),
                new DecodeLimits(props.inference().maxElementsPerTensor(), props.inference().maxInputs()),
                props.inference().maxRequestSize().toBytes(), version == null ? "dev" : version,
                inflight, tensorBuffers, messages, clients);
    }

    /** One thread that sees HTTP clients close their connections while their requests wait. */
    @Bean
    io.etserve.rest.ClientConnections clientConnections() {
        return new io.etserve.rest.ClientConnections();
    }

    @Bean
    ProbeHealth probeHealth(HealthEndpoint endpoint, HealthEndpointGroups groups) {
        return new ProbeHealth(endpoint, groups);
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
