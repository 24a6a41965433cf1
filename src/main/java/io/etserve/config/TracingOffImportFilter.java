package io.etserve.config;

import java.util.List;
import org.springframework.boot.autoconfigure.AutoConfigurationImportFilter;
import org.springframework.boot.autoconfigure.AutoConfigurationMetadata;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.env.Environment;

/**
 * With tracing off ({@code etserve.tracing.enabled=false}, the default) Spring Boot's
 * OpenTelemetry SDK, its log and span processors (each with a worker thread) and Micrometer
 * Tracing's observation handlers are not configured at all: a sampler that records nothing still
 * had every start build the SDK on its main thread and every observed request (Actuator, the
 * rest of the API) pass through the tracing handlers
 * (bench/results/2026-12-05-startup-probe-warmup.md). With tracing on nothing is filtered.
 * Spring Boot's no-op tracer still answers anyone who asks for a {@code Tracer}. Registered in
 * {@code META-INF/spring.factories}; in Spring's ahead-of-time mode the build applies it, and
 * {@link AotFixedSettings} builds the context at startup when a start turns tracing on.
 */
public final class TracingOffImportFilter implements AutoConfigurationImportFilter, EnvironmentAware {

    /** What tracing brings in: the OpenTelemetry SDK and its exporters, Micrometer Tracing's handlers. */
    static final List<String> TRACING = List.of(
            "org.springframework.boot.opentelemetry.autoconfigure.",
            "org.springframework.boot.micrometer.tracing.opentelemetry.autoconfigure.",
            "org.springframework.boot.micrometer.tracing.autoconfigure.MicrometerTracingAutoConfiguration");

    private Environment environment;

    @Override
    public void setEnvironment(Environment environment) {
        this.environment = environment;
    }

    @Override
    public boolean[] match(String[] candidates, AutoConfigurationMetadata metadata) {
        boolean tracing = environment == null
                || environment.getProperty("etserve.tracing.enabled", Boolean.class, false);
        boolean[] keep = new boolean[candidates.length];
        for (int i = 0; i < candidates.length; i++) {
            keep[i] = tracing || candidates[i] == null || !isTracing(candidates[i]);
        }
        return keep;
    }

    static boolean isTracing(String autoConfiguration) {
        return TRACING.stream().anyMatch(autoConfiguration::startsWith);
    }
}
