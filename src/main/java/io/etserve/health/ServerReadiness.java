package io.etserve.health;

import io.etserve.repository.ModelRegistry;
import java.util.List;
import java.util.Optional;
import org.springframework.boot.availability.ApplicationAvailability;
import org.springframework.boot.availability.ReadinessState;

/**
 * One answer to "may traffic come here?", shared by the protocol's {@code /v2/health/ready}
 * and the actuator's readiness group: the application accepts traffic (it goes false first on
 * shutdown), the caller-stream check holds, and the models have loaded (with strict readiness:
 * every model has a version that is ready).
 */
public final class ServerReadiness {

    private final ModelRegistry registry;
    private final ApplicationAvailability availability;
    private final CallerStreamCheck callerStream;
    private final boolean strict;

    public ServerReadiness(ModelRegistry registry, ApplicationAvailability availability, CallerStreamCheck callerStream,
            boolean strict) {
        this.registry = registry;
        this.availability = availability;
        this.callerStream = callerStream;
        this.strict = strict;
    }

    /** For the request path: uses the last caller-stream probe rather than rescanning. */
    public Optional<String> whyNotReady() {
        return whyNotReady(false);
    }

    /** For probes: {@code rescan} walks the loaded objects again. */
    public Optional<String> whyNotReady(boolean rescan) {
        return whyNotAccepting(rescan).or(this::whyModelsNotReady);
    }

    private Optional<String> whyModelsNotReady() {
        if (!registry.isLoaded()) {
            return Optional.of("models are still loading");
        }
        if (registry.repositoryError().isPresent()) {
            return registry.repositoryError();
        }
        if (strict) {
            // a model counts once none of its versions serves: a new version that failed beside one
            // that serves would otherwise take every replica out of rotation during a bad rollout
            List<String> notServing = registry.notServing();
            if (!notServing.isEmpty()) {
                return Optional.of("no version of these models is ready: " + notServing);
            }
        }
        return Optional.empty();
    }

    /**
     * Whether requests may run at all: like readiness but without the model checks, so one failed
     * model never blocks the healthy ones (it only keeps the server out of the load balancer).
     * Uses the last caller-stream probe: this is on the request path.
     */
    public Optional<String> whyNotAccepting() {
        return whyNotAccepting(false);
    }

    private Optional<String> whyNotAccepting(boolean rescan) {
        if (availability.getReadinessState() != ReadinessState.ACCEPTING_TRAFFIC) {
            return Optional.of("the application is not accepting traffic (" + availability.getReadinessState() + ")");
        }
        CallerStreamCheck.Result cs = rescan ? callerStream.check() : callerStream.lastResult();
        return cs.ok() ? Optional.empty() : Optional.of(cs.summary());
    }
}
