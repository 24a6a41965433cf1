package io.etserve.resilience;

import io.etserve.execution.LoadedModel;
import io.etserve.execution.ModelAdmission;
import io.etserve.inference.InferenceFailedException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.OverloadedException;
import io.github.resilience4j.bulkhead.Bulkhead;
import io.github.resilience4j.bulkhead.BulkheadConfig;
import io.github.resilience4j.bulkhead.BulkheadRegistry;
import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Resilience4j per model version: a bulkhead sized to the model's capacity (its instances
 * on every device it is placed on) with a bounded wait, and a circuit breaker on runtime and CUDA
 * failures: it is only ever told of the FAILED kind ({@link InferenceFailedException}), so bad
 * input, overload or a caller that went never count against it.
 *
 * <p>There is deliberately no time limiter: a forward call cannot be cancelled, and giving its
 * stream or Module back while native work still runs would hand the next caller a busy one.
 * A slow call holds its permit until it returns.
 */
public final class ResilientAdmission implements ModelAdmission {

    private final BulkheadRegistry bulkheads;
    private final CircuitBreakerRegistry breakers;
    private final Duration maxWait;
    private final Map<String, Guards> byModel = new ConcurrentHashMap<>();

    private record Guards(Bulkhead bulkhead, CircuitBreaker breaker) {}

    public ResilientAdmission(BulkheadRegistry bulkheads, CircuitBreakerRegistry breakers, Duration maxWait) {
        this.bulkheads = bulkheads;
        this.breakers = breakers;
        this.maxWait = maxWait;
    }

    private Guards guards(LoadedModel model) {
        String key = model.name() + ":" + model.version();
        return byModel.computeIfAbsent(key, k -> {
            BulkheadConfig config = BulkheadConfig.from(bulkheads.getDefaultConfig())
                    .maxConcurrentCalls(model.instances().capacity()).maxWaitDuration(maxWait).build();
            return new Guards(bulkheads.bulkhead(k, config), breakers.circuitBreaker(k));
        });
    }

    /** The breaker of a model version (for tests and health details). */
    public CircuitBreaker breaker(LoadedModel model) {
        return guards(model).breaker();
    }

    @Override
    public Admission admit(LoadedModel model) {
        Guards g = guards(model);
        if (!g.breaker().tryAcquirePermission()) {
            long waitMillis = g.breaker().getCircuitBreakerConfig().getWaitIntervalFunctionInOpenState().apply(1);
            throw new ModelUnavailableException("model '" + model.name() + "' version " + model.version()
                    + " is failing; its circuit breaker is " + g.breaker().getState() + " (retrying after "
                    + waitMillis + " ms)", Duration.ofMillis(waitMillis));
        }
        if (!g.bulkhead().tryAcquirePermission()) {
            g.breaker().releasePermission();
            throw new OverloadedException("model '" + model.name() + "' is at capacity ("
                    + model.instances().capacity() + " concurrent calls); retry later", maxWait.plusSeconds(1));
        }
        return new Admission() {
            private boolean reported;

            // One outcome per call: a failure after success (the stream could not be returned)
            // would otherwise count as a second call.
            @Override
            public void succeeded(long nanos) {
                if (!reported) {
                    reported = true;
                    g.breaker().onSuccess(nanos, TimeUnit.NANOSECONDS);
                }
            }

            @Override
            public void failed(long nanos, InferenceFailedException error) {
                if (!reported) {
                    reported = true;
                    g.breaker().onError(nanos, TimeUnit.NANOSECONDS, error);
                }
            }

            @Override
            public void ignored() {
                if (!reported) {
                    reported = true;
                    g.breaker().releasePermission();
                }
            }

            @Override
            public void close() {
                if (!reported) {
                    g.breaker().releasePermission();
                }
                g.bulkhead().onComplete();
            }
        };
    }

    @Override
    public Optional<String> whyNotAdmitting(LoadedModel model) {
        CircuitBreaker.State state = guards(model).breaker().getState();
        return state == CircuitBreaker.State.OPEN || state == CircuitBreaker.State.FORCED_OPEN
                ? Optional.of("circuit breaker " + state + " after runtime failures")
                : Optional.empty();
    }
}
