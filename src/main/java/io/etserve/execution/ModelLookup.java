package io.etserve.execution;

import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;

/** Where the inference path finds the loaded model that serves a version now: the model repository. */
@FunctionalInterface
public interface ModelLookup {

    /**
     * The model serving {@code version} of {@code model} now ({@code version} null or empty: the
     * newest version that is ready).
     *
     * @throws ModelNotFoundException for an unknown model or version
     * @throws ModelUnavailableException when that version is not ready, with the reason and the version resolved
     */
    LoadedModel serving(String model, String version);
}
