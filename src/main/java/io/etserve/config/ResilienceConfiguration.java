package io.etserve.config;

import io.etserve.resilience.ResilientAdmission;
import io.github.resilience4j.bulkhead.BulkheadRegistry;
import io.github.resilience4j.circuitbreaker.CircuitBreakerRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * A bulkhead and a circuit breaker per model version, from Resilience4j's registries
 * ({@code resilience4j.*} in application.yml), or its defaults when its auto-configuration is off.
 */
@Configuration(proxyBeanMethods = false)
class ResilienceConfiguration {

    @Bean
    ResilientAdmission modelAdmission(ObjectProvider<BulkheadRegistry> bulkheads,
            ObjectProvider<CircuitBreakerRegistry> breakers, EtServeProperties props) {
        return new ResilientAdmission(bulkheads.getIfAvailable(BulkheadRegistry::ofDefaults),
                breakers.getIfAvailable(CircuitBreakerRegistry::ofDefaults), props.inference().queueTimeout());
    }
}
