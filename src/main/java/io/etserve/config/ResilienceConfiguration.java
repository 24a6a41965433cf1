package io.etserve.config;

import io.etserve.resilience.ResilientAdmission;
import io.github.resilience4j.circuitbreaker.CircuitBreakerRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * A circuit breaker per model version, from Resilience4j's registry ({@code resilience4j.*} in
 * application.yml), or its defaults when its auto-configuration is off.
 */
@Configuration(proxyBeanMethods = false)
class ResilienceConfiguration {

    @Bean
    ResilientAdmission modelAdmission(ObjectProvider<CircuitBreakerRegistry> breakers) {
        return new ResilientAdmission(breakers.getIfAvailable(CircuitBreakerRegistry::ofDefaults));
    }
}
