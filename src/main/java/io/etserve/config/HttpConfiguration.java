package io.etserve.config;

import io.etserve.protocol.PublicMessages;
import io.etserve.rest.ErrorPathFilter;
import io.etserve.rest.InferBodyFilter;
import io.etserve.rest.InflightBytes;
import io.etserve.runtime.DirectBufferPool;
import io.micrometer.observation.ObservationPredicate;
import jakarta.servlet.DispatcherType;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.jetty.servlet.JettyServletWebServerFactory;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.server.observation.ServerRequestObservationContext;

/** The HTTP edge: how request bodies are read and what the public port refuses outright. */
@Configuration(proxyBeanMethods = false)
public class HttpConfiguration {

    @Bean
    InflightBytes inflightBytes(EtServeProperties props) {
        return new InflightBytes(props.inference().maxInflightRequestBytes().toBytes());
    }

    /** Tensor buffers reused across requests (request sections, JSON-decoded inputs, outputs). */
    @Bean
    DirectBufferPool tensorBuffers(EtServeProperties props) {
        return new DirectBufferPool(props.inference().tensorBufferPool().toBytes());
    }

    @Bean
    PublicMessages publicMessages(EtServeProperties props) {
        return new PublicMessages(props.modelRepository());
    }

    @Bean
    FilterRegistrationBean<InferBodyFilter> inferBodyFilter(InflightBytes inflight, DirectBufferPool tensorBuffers,
            EtServeProperties props) {
        var registration = new FilterRegistrationBean<>(new InferBodyFilter(inflight, tensorBuffers,
                props.inference().maxRequestSize().toBytes(), props.inference().bodyTimeout()));
        registration.addUrlPatterns("/v2/models/*");
        registration.setDispatcherTypes(DispatcherType.REQUEST, DispatcherType.ASYNC);
        registration.setAsyncSupported(true);
        return registration;
    }

    /** REST inference calls by model and status (io.etserve.metrics.ProtocolMetrics), outside the body filter. */
    @Bean
    FilterRegistrationBean<io.etserve.rest.RestRequestMetricsFilter> restRequestMetricsFilter(
            io.etserve.metrics.ProtocolMetrics metrics) {
        var registration = new FilterRegistrationBean<>(new io.etserve.rest.RestRequestMetricsFilter(metrics));
        registration.addUrlPatterns("/v2/models/*");
        registration.setDispatcherTypes(DispatcherType.REQUEST);
        registration.setAsyncSupported(true);
        registration.setOrder(org.springframework.core.Ordered.HIGHEST_PRECEDENCE + 10);
        return registration;
    }

    /**
     * No {@code http.server.requests} observation for inference calls: Triton's per-model series
     * (io.etserve.metrics.TritonMetrics) already count and time them, and the observation was a
     * large share of a small request's server CPU
     * (bench/results/2026-12-03-2core-small-requests-jetty.md). Other endpoints keep it.
     */
    @Bean
    ObservationPredicate noHttpObservationForInference() {
        return (name, context) -> !(context instanceof ServerRequestObservationContext server
                && InferBodyFilter.isInfer(server.getCarrier()));
    }

    /** The public port's Jetty: see {@link JettyServerSettings} (the management port gets the same). */
    @Bean
    WebServerFactoryCustomizer<JettyServletWebServerFactory> jettyServer(EtServeProperties props) {
        return factory -> factory.addServerCustomizers(new JettyServerSettings(props.http()));
    }

    /**
     * The error path: error pages of {@code /v2} requests in the protocol's shape; asked for
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
