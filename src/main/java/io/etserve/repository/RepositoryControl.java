package io.etserve.repository;

import io.etserve.inference.InvalidInputException;
import io.etserve.inference.UntrustedText;
import io.etserve.modelconfig.ModelConfig;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.UnaryOperator;
import java.util.stream.Collectors;

/**
 * Triton's repository extension behind both protocols: the index in every mode; load and unload
 * of one model only when the repository is controlled explicitly (in the other modes the
 * repository on disk decides what serves).
 */
public final class RepositoryControl {

    /** How the repository changes: read once, polled, or by explicit load / unload. */
    public enum Mode {
        STARTUP,
        POLL,
        EXPLICIT
    }

    /**
     * A load or unload refused: the mode does not allow it, or the model did not load. The
     * invalid-input kind: both protocols answer it as a bad request (REST 400, gRPC INVALID_ARGUMENT).
     */
    public static final class RefusedException extends InvalidInputException {
        public RefusedException(String message) {
            super(message);
        }
    }

    private final ModelRegistry registry;
    private final Mode mode;

    public RepositoryControl(ModelRegistry registry, Mode mode) {
        this.registry = registry;
        this.mode = mode;
    }

    /**
     * One row of the index: a model version and its state, or (version and state empty) a model
     * of the repository that is not loaded, never or no more, as Triton lists those.
     *
     * @param reason why the version does not serve (or what it serves instead), or null
     */
    public record IndexRow(String name, String version, String state, String reason) {
        static IndexRow of(ModelVersionState s) {
            return new IndexRow(s.name(), s.version(), s.status().name(), s.indexReason().orElse(null));
        }

        /** A repository model that is not loaded (no state). */
        public boolean notLoaded() {
            return state.isEmpty();
        }
    }

    /**
     * Every version of every loaded model, then by name the repository's models that are not
     * loaded; {@code readyOnly}: the versions that serve only. In name order.
     */
    public List<IndexRow> index(boolean readyOnly) {
        List<IndexRow> rows = new ArrayList<>();
        Set<String> loaded = new HashSet<>();
        for (ModelVersionState s : registry.states()) {
            loaded.add(s.name());
            if (!readyOnly || s.ready()) {
                rows.add(IndexRow.of(s));
            }
        }
        if (!readyOnly) {
            for (String name : registry.repositoryModelNames()) {
                if (!loaded.contains(name)) {
                    rows.add(new IndexRow(name, "", "", null));
                }
            }
            rows.sort(Comparator.comparing(IndexRow::name));  // stable: a model's versions keep their order
        }
        return rows;
    }

    /**
     * Loads or reloads {@code model}.
     *
     * @throws RefusedException when the mode forbids it, or when a version did not load, with the
     *     reason and the version that answers for the model meanwhile, if any
     */
    public void load(String model) {
        load(model, null);
    }

    /**
     * As {@link #load(String)}, with {@code override} applied to config.yml's configuration for
     * this load (a load request's {@code config} parameter); null for none.
     *
     * @throws RefusedException also when the override does not fit the model's configuration
     */
    public void load(String model, UnaryOperator<ModelConfig> override) {
        requireExplicit("load");
        List<ModelVersionState> failed;
        try {
            failed = registry.load(model, override);
        } catch (ModelConfig.InvalidModelConfigException e) {
            throw new RefusedException("load of '" + UntrustedText.abbreviate(model) + "' refused: " + e.getMessage());
        }
        if (!failed.isEmpty()) {
            ModelVersionState served = registry.resolve(model, null);
            throw new RefusedException("failed to load '" + UntrustedText.abbreviate(model) + "'" + failed.stream()
                    .map(s -> (s.version().isEmpty() ? "" : " version " + s.version()) + ": "
                            + s.notReadyReason().orElse(""))
                    .collect(Collectors.joining(";")) + (served.ready()
                            ? " (version " + served.version() + " answers for the model)" : ""));
        }
    }

    public void unload(String model) {
        requireExplicit("unload");
        registry.unload(model);
    }

    private void requireExplicit(String what) {
        if (mode != Mode.EXPLICIT) {
            throw new RefusedException("explicit model " + what + " is not allowed: etserve.repository.mode is "
                    + mode.name().toLowerCase(Locale.ROOT) + " (set it to explicit)");
        }
    }
}
