package io.etserve.repository;

import io.etserve.execution.InferenceService;
import io.etserve.execution.LoadedModel;
import io.etserve.inference.ModelDescription;
import java.util.Objects;
import java.util.Optional;

/**
 * Where one model version stands, as one of three types, so that code holding a {@link Ready}
 * always has a model with instances and nothing else has to check:
 * {@link Ready} serves; {@link Unavailable} loaded but cannot run on this node (its metadata is
 * still served); {@link Failed} did not load (corrupt file, bad config).
 */
public sealed interface ModelVersionState
        permits ModelVersionState.Ready, ModelVersionState.Unavailable, ModelVersionState.Failed {

    /** The three states by name, as health details and logs show them. */
    enum Status {
        READY,
        UNAVAILABLE,
        FAILED
    }

    String name();

    /** The version directory's name; empty when the model has no usable version directory. */
    String version();

    Status status();

    /** What the program declares, when it loaded (ready, or unavailable on this node). */
    Optional<ModelDescription> description();

    /** Why it does not serve; empty when it is ready. */
    Optional<String> notReadyReason();

    /** Why this version cannot take a call now: its state's reason, or what {@code inference} says of its model. */
    default Optional<String> whyNotServing(InferenceService inference) {
        return this instanceof Ready ready ? inference.whyNotServing(ready.model()) : notReadyReason();
    }

    /**
     * What the repository index and health say beside the state: why it does not serve, or, for
     * a version that serves, why its newer files did not load.
     */
    default Optional<String> indexReason() {
        return notReadyReason();
    }

    /** Whether its last load failed: it serves nothing, or serves what it loaded before. */
    default boolean loadFailed() {
        return this instanceof Failed || this instanceof Ready r && r.failedReload() != null;
    }

    default boolean ready() {
        return this instanceof Ready;
    }

    /**
     * Serves: the program loaded and its instances exist. {@code failedReload}, when not null,
     * says why the version's changed files did not load: it serves what it loaded before.
     */
    record Ready(LoadedModel model, String failedReload) implements ModelVersionState {
        public Ready {
            Objects.requireNonNull(model, "model");
        }

        public Ready(LoadedModel model) {
            this(model, null);
        }

        /** The same serving model, noting why a newer load of its version failed. */
        public Ready withFailedReload(String reason) {
            return new Ready(model, reason);
        }

        @Override
        public String name() {
            return model.name();
        }

        @Override
        public String version() {
            return model.version();
        }

        @Override
        public Status status() {
            return Status.READY;
        }

        @Override
        public Optional<ModelDescription> description() {
            return Optional.of(model.description());
        }

        @Override
        public Optional<String> notReadyReason() {
            return Optional.empty();
        }

        @Override
        public Optional<String> indexReason() {
            return Optional.ofNullable(failedReload);
        }
    }

    /**
     * The program loaded, but this node cannot run it (a delegate it lacks, no CUDA device); the
     * program itself was freed at load, only its description is kept.
     */
    record Unavailable(ModelDescription model, String reason) implements ModelVersionState {
        @Override
        public String name() {
            return model.name();
        }

        @Override
        public String version() {
            return model.version();
        }

        @Override
        public Status status() {
            return Status.UNAVAILABLE;
        }

        @Override
        public Optional<ModelDescription> description() {
            return Optional.of(model);
        }

        @Override
        public Optional<String> notReadyReason() {
            return Optional.of(reason);
        }
    }

    /** Did not load; {@code reason} says why. */
    record Failed(String name, String version, String reason) implements ModelVersionState {
        @Override
        public Status status() {
            return Status.FAILED;
        }

        @Override
        public Optional<ModelDescription> description() {
            return Optional.empty();
        }

        @Override
        public Optional<String> notReadyReason() {
            return Optional.of(reason);
        }
    }
}
