package io.etserve.bench;

import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig;
import io.github.resilience4j.circuitbreaker.event.CircuitBreakerEvent;
import io.github.resilience4j.consumer.DefaultEventConsumerRegistry;
import io.github.resilience4j.micrometer.tagged.TaggedCircuitBreakerMetricsPublisher;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What a model version's circuit breaker costs per successful call
 * ({@code ResilientAdmission}: a permission, then the outcome), with the window application.yml
 * configures: on a bare breaker, and on one wired as Spring Boot's Resilience4j module wires every
 * breaker of its registry, with a 100-event buffer for the {@code circuitbreakerevents} endpoint
 * and Micrometer's timers, both fed by an event built for each call. One thread, and two on the
 * same breaker (one model's calls on two request threads or selectors).
 *
 * <p>Run: {@code java -cp <test classpath> org.openjdk.jmh.Main BreakerOutcomeBenchmark -prof gc}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@State(Scope.Benchmark)
public class BreakerOutcomeBenchmark {

    @Param({"bare", "as-spring-wires-it"})
    public String breaker;

    private CircuitBreaker versionBreaker;

    @Setup
    public void breaker() {
        CircuitBreakerConfig config = CircuitBreakerConfig.custom()
                .slidingWindowType(CircuitBreakerConfig.SlidingWindowType.COUNT_BASED)
                .slidingWindowSize(20).minimumNumberOfCalls(5).failureRateThreshold(50).build();
        versionBreaker = CircuitBreaker.of("demo-xnnpack:1", config);
        if (breaker.equals("as-spring-wires-it")) {
            versionBreaker.getEventPublisher().onEvent(
                    new DefaultEventConsumerRegistry<CircuitBreakerEvent>().createEventConsumer("demo-xnnpack:1", 100));
            new TaggedCircuitBreakerMetricsPublisher(new SimpleMeterRegistry()).publishMetrics(versionBreaker);
        }
    }

    @Benchmark
    @Threads(1)
    public boolean oneThread() {
        return call();
    }

    @Benchmark
    @Threads(2)
    public boolean twoThreads() {
        return call();
    }

    private boolean call() {
        boolean admitted = versionBreaker.tryAcquirePermission();
        versionBreaker.onSuccess(20_000, TimeUnit.NANOSECONDS);
        return admitted;
    }
}
