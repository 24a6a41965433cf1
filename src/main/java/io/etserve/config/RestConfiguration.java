package io.etserve.config;

import io.etserve.execution.InferenceService;
import io.etserve.health.ProbeHealth;
import io.etserve.health.ServerReadiness;
import io.etserve.inference.InflightBytes;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.metrics.TritonMetrics;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.InferRequestDecoder;
import io.etserve.protocol.InferResponseEncoder;
import io.etserve.protocol.PublicMessages;
import io.etserve.repository.ModelRegistry;
import io.etserve.rest.ClientConnections;
import io.etserve.rest.ErrorPathFilter;
import io.etserve.rest.InferBodyFilter;
import io.etserve.rest.InferenceProtocolController;
import io.etserve.rest.RestRequestMetricsFilter;
import io.etserve.rest.UnreadBodyFilter;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.sharedmemory.SharedMemoryRegions;
import io.micrometer.observation.ObservationPredicate;
import jakarta.servlet.DispatcherType;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.http.server.observation.ServerRequestObservationContext;
import org.springframework.util.function.SingletonSupplier;

/**
 * The Open Inference Protocol over REST on the public port: its controllers, how request bodies
 * are read, and error pages in the protocol's shape. Filters on inference calls, outermost first:
 * {@link ApiAccessConfiguration}'s, {@link TracingConfiguration}'s, the metrics filter, the body filter.
 */
@Configuration(proxyBeanMethods = false)
class RestConfiguration {

    /**
     * Replaces the scanned bean of the same name (the other controllers are scanned): its limits
     * come from {@code etserve.inference.*}.
     */
    @Bean
    InferenceProtocolController inferenceProtocolController(ModelRegistry registry, InferenceService inference,
            ServerReadiness readiness, ProbeHealth probes, EtServeProperties props, InflightBytes inflight,
            DirectBufferPool tensorBuffers, PublicMessages messages, ClientConnections clients,
            SharedMemoryRegions sharedMemory) {
        return new InferenceProtocolController(registry, inference, readiness, probes,
                new InferRequestDecoder(sharedMemory), new InferResponseEncoder(), sharedMemory,
                new DecodeLimits(props.inference().maxElementsPerTensor(), props.inference().maxInputs()),
                props.inference().maxRequestSize().toBytes(), ServiceVersion.current(), inflight, tensorBuffers,
                messages, clients);
    }

    /** One thread that sees HTTP clients close their connections while their requests wait. */
    @Bean
    ClientConnections clientConnections() {
        return new ClientConnections();
    }

    @Bean
    FilterRegistrationBean<InferBodyFilter> inferBodyFilter(InflightBytes inflight, DirectBufferPool tensorBuffers,
            EtServeProperties props, ObjectProvider<InferenceProtocolController> controller) {
        // The controller (and the inference beans behind it, CUDA's among them) is looked up at the
        // first request: the filter is made while the web server is created, and asking for it
        // here would make the context wait for CUDA's early start before Jetty's initialization.
        var registration = new FilterRegistrationBean<>(new InferBodyFilter(inflight, tensorBuffers,
                props.inference().maxRequestSize().toBytes(), props.inference().bodyTimeout(),
                SingletonSupplier.of(() -> controller.getObject().exchange())));
        registration.addUrlPatterns("/v2/models/*");
        registration.setDispatcherTypes(DispatcherType.REQUEST, DispatcherType.ASYNC);
        registration.setAsyncSupported(true);
        // After the access, tracing and metrics filters, before Spring MVC's own (request context,
        // form content): a plain model path is served here and never needs them (the usual
        // request, whose body came whole, does not reach the servlet layer: InferHandler); the
        // others go on through them to the controller.
        registration.setOrder(Ordered.HIGHEST_PRECEDENCE + 20);
        return registration;
    }

    /** REST inference calls by model and status ({@link ProtocolMetrics}), outside the body filter. */
    @Bean
    FilterRegistrationBean<RestRequestMetricsFilter> restRequestMetricsFilter(ProtocolMetrics metrics) {
        var registration = new FilterRegistrationBean<>(new RestRequestMetricsFilter(metrics));
        registration.addUrlPatterns("/v2/models/*");
        registration.setDispatcherTypes(DispatcherType.REQUEST);
        registration.setAsyncSupported(true);
        registration.setOrder(Ordered.HIGHEST_PRECEDENCE + 10);
        return registration;
    }

    /**
     * No {@code http.server.requests} observation for inference calls: Triton's per-model series
     * ({@link TritonMetrics}) already count and time them, and the observation
     * was a large share of a small request's server CPU
     * (bench/results/2026-12-03-2core-small-requests-jetty.md). Other endpoints keep it.
     */
    @Bean
    ObservationPredicate noHttpObservationForInference() {
        return (name, context) -> !(context instanceof ServerRequestObservationContext server
                && InferBodyFilter.isInfer(server.getCarrier()));
    }

    /**
     * First on the public port: what a request answered on its own thread left unread of its body
     * is read, so its connection carries the next request.
     */
    @Bean
    FilterRegistrationBean<UnreadBodyFilter> unreadBodyFilter() {
        var registration = new FilterRegistrationBean<>(new UnreadBodyFilter());
        registration.addUrlPatterns("/*");
        registration.setDispatcherTypes(DispatcherType.REQUEST);
        registration.setOrder(Ordered.HIGHEST_PRECEDENCE);
        return registration;
    }

    /**
     * The error path: error pages of {@code /v2} requests in the protocol's shape, and the path asked for
     * directly, not an endpoint.
     */
    @Bean
    FilterRegistrationBean<ErrorPathFilter> errorPathFilter(@Value("${server.error.path:/error}") String errorPath) {
        var registration = new FilterRegistrationBean<>(new ErrorPathFilter());
        registration.addUrlPatterns(errorPath);
        registration.setDispatcherTypes(DispatcherType.ERROR, DispatcherType.REQUEST);
        return registration;
    }
}
