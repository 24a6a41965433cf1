package io.etserve.health;

import io.etserve.execution.InferenceService;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.ModelVersionState;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * {@code models}: every model version's state and, where it has one, its reason (a version that
 * failed while an older one answers for the model shows FAILED here and leaves the component
 * UP); DOWN while the server is not ready.
 */
public final class ModelsHealthIndicator implements HealthIndicator {

    private final ModelRegistry registry;
    private final ServerReadiness readiness;
    private final InferenceService inference;

    public ModelsHealthIndicator(ModelRegistry registry, ServerReadiness readiness, InferenceService inference) {
        this.registry = registry;
        this.readiness = readiness;
        this.inference = inference;
    }

    @Override
    public Health health() {
        Map<String, Object> models = new LinkedHashMap<>();
        for (ModelVersionState s : registry.states()) {
            Map<String, Object> d = new LinkedHashMap<>();
            var notServing = s.whyNotServing(inference);
            d.put("status", s.ready() && notServing.isPresent() ? "NOT_ADMITTING" : s.status().name());
            notServing.or(s::indexReason).ifPresent(r -> d.put("reason", r));
            s.description().ifPresent(m -> d.put("backends", m.signature().backends()));
            if (s instanceof ModelVersionState.Ready ready) {
                d.put("placement", ready.model().instances().placement());
                d.put("instances", ready.model().instances().capacity());
            }
            models.put(s.name() + (s.version().isEmpty() ? "" : ":" + s.version()), d);
        }
        var why = readiness.whyNotReady(true);
        Health.Builder b = why.isEmpty() ? Health.up() : Health.down();
        why.ifPresent(w -> b.withDetail("reason", w));
        return b.withDetail("models", models).build();
    }
}
