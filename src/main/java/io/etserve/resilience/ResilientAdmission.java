package io.etserve.resilience;

import io.etserve.execution.LoadedModel;
import io.etserve.execution.ModelAdmission;
import io.etserve.inference.InferenceFailedException;
import io.etserve.inference.ModelUnavailableException;
import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A Resilience4j circuit breaker per model version, on runtime and CUDA failures: it is only
 * ever told of the FAILED kind ({@link InferenceFailedException}), so bad input, overload or a
 * caller that went never count against it.
 *
 * <p>There is no bulkhead: a call is admitted once it holds one of its model's instances, so the
 * instances already bound a model's concurrent calls (and their line bounds the wait,
 * {@code etserve.inference.queue-timeout}); a bulkhead sized to them always had a permit and cost
 * two events per call. There is deliberately no time limiter either: a forward call cannot be
 * cancelled, and giving its stream or Module back while native work still runs would hand the
 * next caller a busy one.
 */
public final class ResilientAdmission implements ModelAdmission {

    private final CircuitBreakerRegistry breakers;
    /** Breakers by model name, then version: found without building a key per call. */
    private final Map<String, Map<String, Versioned>> byModel = new ConcurrentHashMap<>();

    public ResilientAdmission(CircuitBreakerRegistry breakers) {
        this.breakers = breakers;
    }

    /** A version's breaker and the latest load of that version that used it. */
    private record Versioned(long load, CircuitBreaker breaker) {}

    /**
     * The breaker of a model version (for tests and health details). A version loaded again
     * (its files fixed, a reload) starts with its breaker closed and its window empty: the
     * failures it counted were the earlier load's. A draining earlier load shares the breaker
     * meanwhile, and never resets it.
     */
    public CircuitBreaker breaker(LoadedModel model) {
        Map<String, Versioned> versions = byModel.computeIfAbsent(model.name(), name -> new ConcurrentHashMap<>());
        Versioned known = versions.get(model.version());
        if (known != null && known.load() >= model.load()) {
            return known.breaker();
        }
        String name = model.name();
        return versions.compute(model.version(), (version, earlier) -> {
            if (earlier == null) {
                return new Versioned(model.load(), breakers.circuitBreaker(name + ":" + version));
            }
            if (earlier.load() < model.load()) {
                earlier.breaker().reset();
                return new Versioned(model.load(), earlier.breaker());
            }
            return earlier;
        }).breaker();
    }

    @Override
    public Admission admit(LoadedModel model) {
        CircuitBreaker breaker = breaker(model);
        if (!breaker.tryAcquirePermission()) {
            long waitMillis = breaker.getCircuitBreakerConfig().getWaitIntervalFunctionInOpenState().apply(1);
            throw new ModelUnavailableException("model '" + model.name() + "' version " + model.version()
                    + " is failing; its circuit breaker is " + breaker.getState() + " (retrying after "
                    + waitMillis + " ms)", Duration.ofMillis(waitMillis));
        }
        return new Outcome(breaker);
    }

    @Override
    public Optional<String> whyNotAdmitting(LoadedModel model) {
        CircuitBreaker.State state = breaker(model).getState();
        return state == CircuitBreaker.State.OPEN || state == CircuitBreaker.State.FORCED_OPEN
                ? Optional.of("circuit breaker " + state + " after runtime failures")
                : Optional.empty();
    }

    /**
     * One outcome per call: a failure after success (the stream could not be returned) would
     * otherwise count as a second call.
     */
    private static final class Outcome implements Admission {
        private final CircuitBreaker breaker;
        private boolean reported;

        Outcome(CircuitBreaker breaker) {
            this.breaker = breaker;
        }

        @Override
        public void succeeded(long nanos) {
            if (!reported) {
                reported = true;
                breaker.onSuccess(nanos, TimeUnit.NANOSECONDS);
            }
        }

        @Override
        public void failed(long nanos, InferenceFailedException error) {
            if (!reported) {
                reported = true;
                breaker.onError(nanos, TimeUnit.NANOSECONDS, error);
            }
        }

        @Override
        public void ignored() {
            if (!reported) {
                reported = true;
                breaker.releasePermission();
            }
        }

        @Override
        public void close() {
            if (!reported) {
                reported = true;
                breaker.releasePermission();
            }
        }
    }
}
