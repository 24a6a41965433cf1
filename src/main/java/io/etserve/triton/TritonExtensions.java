package io.etserve.triton;

import io.etserve.grpc.protocol.ModelConfig;
import io.etserve.grpc.protocol.ModelStatisticsResponse;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.UntrustedText;
import io.etserve.metrics.TritonMetrics;
import io.etserve.modelconfig.DynamicBatching;
import io.etserve.modelconfig.VersionPolicy;
import io.etserve.protocol.ControlBodies;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.ModelVersionState;
import io.etserve.repository.RepositoryControl;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import tools.jackson.databind.JsonNode;

/**
 * Triton's model configuration and statistics extensions, and the repository extension's load
 * with a configuration, behind both protocols: REST and gRPC answer from the same messages.
 */
public final class TritonExtensions {

    /** Server metadata's {@code extensions} where CUDA shared memory cannot be served (no CUDA device). */
    public static final List<String> EXTENSIONS = List.of("binary_tensor_data", "model_repository",
            "model_configuration", "statistics", "system_shared_memory");

    /** Server metadata's {@code extensions}: {@link #EXTENSIONS}, and {@code cuda_shared_memory} where it is served. */
    public static List<String> served(boolean cudaSharedMemory) {
        if (!cudaSharedMemory) {
            return EXTENSIONS;
        }
        List<String> all = new ArrayList<>(EXTENSIONS);
        all.add("cuda_shared_memory");
        return List.copyOf(all);
    }

    private final ModelRegistry registry;
    private final RepositoryControl repository;
    private final TritonMetrics metrics;
    private final Set<Integer> gpus;

    /** @param gpus the CUDA device ordinals this node serves (a KIND_GPU override needs one) */
    public TritonExtensions(ModelRegistry registry, RepositoryControl repository, TritonMetrics metrics,
            Set<Integer> gpus) {
        this.registry = registry;
        this.repository = repository;
        this.metrics = metrics;
        this.gpus = Set.copyOf(gpus);
    }

    /**
     * The configuration of the named version (without one, the version a request would reach).
     *
     * @throws ModelNotFoundException for an unknown model or version
     * @throws ModelUnavailableException when that version does not serve
     */
    public ModelConfig config(String model, String version) {
        return TritonModelConfig.of(serving(registry.resolve(model, version)).model());
    }

    /**
     * Statistics of every serving version of every model ({@code model} empty), of every serving
     * version of one model ({@code version} empty), or of one version.
     */
    public ModelStatisticsResponse statistics(String model, String version) {
        ModelStatisticsResponse.Builder b = ModelStatisticsResponse.newBuilder();
        List<ModelVersionState> states;
        if (isEmpty(model)) {
            states = registry.states();
        } else if (isEmpty(version)) {
            registry.resolve(model, null);  // 404 for an unknown model
            states = registry.states().stream().filter(s -> s.name().equals(model)).toList();
        } else {
            states = List.of(serving(registry.resolve(model, version)));
        }
        for (ModelVersionState s : states) {
            if (s instanceof ModelVersionState.Ready) {
                b.addModelStats(TritonStatistics.of(metrics.statistics(s.name(), s.version())));
            }
        }
        return b.build();
    }

    /**
     * Loads {@code model}, with {@code config} (a Triton configuration as JSON; null for none)
     * applied to its config.yml for this load.
     *
     * @throws RepositoryControl.RefusedException for a configuration that cannot be honoured,
     *     naming the field, with nothing changed, or when the load fails
     */
    public void load(String model, String config) {
        if (config == null) {
            repository.load(model);
            return;
        }
        ConfigOverride override;
        try {
            override = ConfigOverride.parse(model, config, gpus);
            describedNow(model).ifPresent(d -> override.checkTensors(TritonModelConfig.build(d.name(), d.inputs(),
                    d.outputs(), override.maxBatchSize() > 0
                            ? Optional.of(new DynamicBatching(override.maxBatchSize(), Duration.ZERO, List.of()))
                            : Optional.empty(),
                    VersionPolicy.ALL, "cpu", 1)));
        } catch (ConfigOverride.InvalidOverrideException e) {
            throw new RepositoryControl.RefusedException("load of '" + UntrustedText.abbreviate(model) + "' refused: "
                    + e.getMessage());
        }
        repository.load(model, override);
    }

    /**
     * Whether a REST index request's body ({@code {"ready": true}}, optional) asks for the versions
     * that serve only. Read as bytes: Triton's clients send it without a Content-Type.
     *
     * @throws RepositoryControl.RefusedException for a body that is not a JSON object
     */
    public static boolean indexReadyOnly(byte[] body) {
        JsonNode doc = bodyObject(body, "index");
        JsonNode ready = doc == null ? null : doc.get("ready");
        if (ready != null && !ready.isNull() && !ready.isBoolean()) {
            throw new RepositoryControl.RefusedException("the index request's ready must be true or false");
        }
        return ready != null && ready.isBoolean() && ready.booleanValue();
    }

    /**
     * Checks an unload request's optional body: nothing, or a JSON object whose {@code parameters}
     * (Triton's {@code unload_dependents}: this service loads no model for another) is an object.
     *
     * @throws RepositoryControl.RefusedException for any other body
     */
    public static void checkUnloadBody(byte[] body) {
        JsonNode doc = bodyObject(body, "unload");
        if (doc != null) {
            parameters(doc, "unload");
        }
    }

    /**
     * A repository request body's {@code parameters}, null when absent or null.
     *
     * @throws RepositoryControl.RefusedException naming the {@code request} when they are not an object
     */
    private static JsonNode parameters(JsonNode doc, String request) {
        JsonNode parameters = doc.get("parameters");
        if (parameters == null || parameters.isNull()) {
            return null;
        }
        if (!parameters.isObject()) {
            throw new RepositoryControl.RefusedException("the " + request + " request's parameters must be a JSON object");
        }
        return parameters;
    }

    /** A repository request's optional body as a JSON object, null when there is none. */
    private static JsonNode bodyObject(byte[] body, String request) {
        return ControlBodies.optionalObject(body, request, RepositoryControl.RefusedException::new);
    }

    /**
     * The {@code config} parameter of a REST load request's body ({@code {"parameters": {"config":
     * "..."}}}), null when there is none (no body, {@code {}}).
     *
     * @throws RepositoryControl.RefusedException for a body that is not such a document, or that
     *     carries what this service cannot honour (model files, unknown parameters)
     */
    public static String loadConfig(byte[] body) {
        JsonNode doc = bodyObject(body, "load");
        if (doc == null) {
            return null;
        }
        for (String key : doc.propertyNames()) {
            if (!key.equals("parameters")) {
                throw new RepositoryControl.RefusedException("the load request's body has '"
                        + UntrustedText.abbreviate(key) + "'; it may hold parameters only");
            }
        }
        JsonNode parameters = parameters(doc, "load");
        if (parameters == null) {
            return null;
        }
        checkParameterNames(parameters.propertyNames());
        JsonNode config = parameters.get("config");
        if (config == null) {
            return null;
        }
        if (!config.isString()) {
            throw new RepositoryControl.RefusedException("the load request's config parameter must be a string"
                    + " holding the model configuration as JSON");
        }
        return config.asString();
    }

    /** A load request's parameters other than {@code config} cannot be honoured: each is refused. */
    public static void checkParameterNames(Collection<String> names) {
        for (String name : names) {
            if (name.startsWith("file:")) {
                throw new RepositoryControl.RefusedException("the load request's parameter '"
                        + UntrustedText.abbreviate(name) + "' carries a model file; etserve loads models from its"
                        + " repository only");
            }
            if (!name.equals("config")) {
                throw new RepositoryControl.RefusedException("the load request's parameter '"
                        + UntrustedText.abbreviate(name) + "' is not supported (only config is)");
            }
        }
    }

    /** What the model declares now (the version a request would reach), when it loaded at all. */
    private Optional<ModelDescription> describedNow(String model) {
        try {
            return registry.resolve(model, null).description();
        } catch (ModelNotFoundException e) {
            return Optional.empty();
        }
    }

    private static ModelVersionState.Ready serving(ModelVersionState state) {
        if (state instanceof ModelVersionState.Ready ready) {
            return ready;
        }
        throw new ModelUnavailableException(ModelRegistry.notReady(state));
    }

    private static boolean isEmpty(String s) {
        return s == null || s.isEmpty();
    }
}
