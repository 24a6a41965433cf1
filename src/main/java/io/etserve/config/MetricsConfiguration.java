package io.etserve.config;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamPools;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.metrics.StreamPoolMetrics;
import io.etserve.metrics.TritonMetrics;
import io.etserve.repository.ModelRegistry;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Prometheus series on the management port: Triton's per-model series (which the registry and
 * the inference path record into), calls by protocol and status, and the stream pools.
 */
@Configuration(proxyBeanMethods = false)
class MetricsConfiguration {

    @Bean
    TritonMetrics tritonMetrics(MeterRegistry meters) {
        return new TritonMetrics(meters);
    }

    /** Labels only models the registry knows, so a caller cannot grow the series with made-up names. */
    @Bean
    ProtocolMetrics protocolMetrics(MeterRegistry meters, ModelRegistry registry) {
        return new ProtocolMetrics(meters, registry::knows);
    }

    @Bean
    StreamPoolMetrics streamPoolMetrics(StreamPools pools, CudaRuntime cuda) {
        return new StreamPoolMetrics(pools, cuda);
    }
}
