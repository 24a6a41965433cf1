package io.etserve.config;

import io.etserve.cuda.CudaRuntime;
import io.etserve.cuda.StreamPools;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.metrics.StreamPoolMetrics;
import io.etserve.metrics.TritonMetrics;
import io.etserve.repository.ModelRegistry;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.util.function.SingletonSupplier;

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

    /**
     * Labels only models the registry knows, so a caller cannot grow the series with made-up names.
     * The registry is looked up at the first call: the REST metrics filter holding this is made
     * while the web server is created, before the inference beans.
     */
    @Bean
    ProtocolMetrics protocolMetrics(MeterRegistry meters, ObjectProvider<ModelRegistry> registry) {
        SingletonSupplier<ModelRegistry> models = SingletonSupplier.of(registry::getObject);
        return new ProtocolMetrics(meters, name -> models.obtain().knows(name));
    }

    @Bean
    StreamPoolMetrics streamPoolMetrics(StreamPools pools, CudaRuntime cuda) {
        return new StreamPoolMetrics(pools, cuda);
    }
}
