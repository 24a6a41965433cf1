package io.etserve.inference;

import java.util.Optional;

/**
 * Where one model version stands. READY serves; UNAVAILABLE loaded but cannot run on this node
 * (its metadata is still served); FAILED did not load (corrupt file, bad config).
 */
public record ModelVersionState(String name, String version, Status status, String reason, LoadedModel model) {

    public enum Status {
        READY,
        UNAVAILABLE,
        FAILED
    }

    public static ModelVersionState ready(LoadedModel model) {
        return new ModelVersionState(model.name(), model.version(), Status.READY, null, model);
    }

    public static ModelVersionState unavailable(LoadedModel model, String reason) {
        return new ModelVersionState(model.name(), model.version(), Status.UNAVAILABLE, reason, model);
    }

    public static ModelVersionState failed(String name, String version, String reason) {
        return new ModelVersionState(name, version, Status.FAILED, reason, null);
    }

    public boolean ready() {
        return status == Status.READY;
    }

    public Optional<LoadedModel> loaded() {
        return Optional.ofNullable(model);
    }

    public Optional<String> reasonIfNotReady() {
        return Optional.ofNullable(reason);
    }
}
