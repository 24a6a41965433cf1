package io.etserve.config;

import io.etserve.execution.InferenceSpans;
import io.etserve.tracing.GrpcTracingInterceptor;
import io.etserve.tracing.RestTracingFilter;
import io.etserve.tracing.ServerSpans;
import io.etserve.tracing.TracedInferenceSpans;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;
import jakarta.servlet.DispatcherType;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;

/**
 * OpenTelemetry traces of inference calls (docs/tracing.md), on Spring Boot's own Micrometer
 * Tracing and OTLP export ({@code management.tracing.*}, {@code management.opentelemetry.*}).
 * Off unless {@code etserve.tracing.enabled}: then no span exists on the inference path
 * ({@link InferenceSpans#OFF}, no filter, no interceptor) and Spring Boot's tracing is not
 * configured at all ({@link TracingOffImportFilter}).
 */
@Configuration(proxyBeanMethods = false)
class TracingConfiguration {

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBooleanProperty("etserve.tracing.enabled")
    static class Enabled {

        @Bean
        ServerSpans serverSpans(Tracer tracer, Propagator propagator) {
            return new ServerSpans(tracer, propagator);
        }

        @Bean
        InferenceSpans inferenceSpans(Tracer tracer) {
            return new TracedInferenceSpans(tracer);
        }

        /** Outermost on inference calls: the body's arrival is inside the request's span. */
        @Bean
        FilterRegistrationBean<RestTracingFilter> restTracingFilter(ServerSpans spans) {
            var registration = new FilterRegistrationBean<>(new RestTracingFilter(spans));
            registration.addUrlPatterns("/v2/models/*");
            registration.setDispatcherTypes(DispatcherType.REQUEST, DispatcherType.ASYNC);
            registration.setAsyncSupported(true);
            registration.setOrder(Ordered.HIGHEST_PRECEDENCE + 5);
            return registration;
        }

        @Bean
        GrpcTracingInterceptor grpcTracingInterceptor(ServerSpans spans) {
            return new GrpcTracingInterceptor(spans);
        }
    }
}
