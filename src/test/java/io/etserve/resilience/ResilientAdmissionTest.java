package io.etserve.resilience;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.execution.InferenceObserver;
import io.etserve.execution.LoadedModel;
import io.etserve.inference.InferenceFailedException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.repository.CpuModelLoaders;
import io.etserve.repository.ModelRegistry;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig;
import io.github.resilience4j.circuitbreaker.CircuitBreakerRegistry;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** A breaker per model version, on real loads of the demo model (CPU): what a reload of the version does to it. */
class ResilientAdmissionTest {

    private final ModelRepositoryFixture repo = ModelRepositoryFixture.create("etserve-breaker-")
            .copy(TestPaths.demoModels(), "demo-portable");
    private final ModelRegistry registry = new ModelRegistry(repo.root(), CpuModelLoaders.create(),
            InferenceObserver.NONE);
    private final ResilientAdmission admission = new ResilientAdmission(CircuitBreakerRegistry.of(
            CircuitBreakerConfig.custom().slidingWindowSize(3).minimumNumberOfCalls(2).failureRateThreshold(60)
                    .waitDurationInOpenState(Duration.ofMinutes(10)).build()));

    @AfterEach
    void close() {
        registry.close();
    }

    private void fail(LoadedModel model) throws InterruptedException {
        try (var call = admission.admit(model)) {
            call.failed(1_000, new InferenceFailedException(new IllegalStateException("the delegate failed")));
        }
    }

    @Test
    void aVersionLoadedAgainStartsWithItsBreakerClosedAndItsDrainingLoadLeavesItSo() throws Exception {
        registry.loadAll();
        LoadedModel first = registry.serving("demo-portable", "1");
        fail(first);
        fail(first);
        assertThat(admission.breaker(first).getState()).isEqualTo(CircuitBreaker.State.OPEN);
        assertThatThrownBy(() -> admission.admit(first)).isInstanceOf(ModelUnavailableException.class);

        // The files were fixed and the version loaded again: its failures were the first load's.
        registry.load("demo-portable");
        LoadedModel second = registry.serving("demo-portable", "1");
        assertThat(second).isNotSameAs(first);
        assertThat(admission.whyNotAdmitting(second)).isEmpty();
        admission.admit(second).succeeded(1_000);

        // One failure of the earlier load, still finishing its calls, neither resets nor opens it.
        fail(first);
        assertThat(admission.breaker(second).getState()).isEqualTo(CircuitBreaker.State.CLOSED);
        assertThat(admission.breaker(first)).isSameAs(admission.breaker(second));
        assertThat(admission.breaker(second).getMetrics().getNumberOfFailedCalls()).isEqualTo(1);
    }
}
