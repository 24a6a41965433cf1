package io.etserve.inference;

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

    default boolean ready() {
        return this instanceof Ready;
    }

    /** Serves: the program loaded and its instances exist. */
    record Ready(LoadedModel model) implements ModelVersionState {
        public Ready {
            Objects.requireNonNull(model, "model");
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
