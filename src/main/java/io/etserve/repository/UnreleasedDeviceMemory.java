package io.etserve.repository;

import io.etserve.inference.ModelDescription;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * What unloading does with a model whose delegate cannot give its device memory back.
 *
 * <p>ExecuTorch's CUDA delegate ({@code CudaBackend}) leaves every AOTI model container (the
 * instance's weights and workspace on the device) allocated when a program is freed: its
 * {@code destroy()} skips {@code AOTInductorModelContainerDelete}, which is unsafe with several
 * containers in one process, so the memory stays until the process exits. Each unload or reload
 * of such a model therefore leaks what its instances hold on the device. The service says so at
 * the door instead of running out of device memory later.
 */
public final class UnreleasedDeviceMemory {

    /** Delegates whose instances keep device memory after they are freed. */
    static final List<String> DELEGATES = List.of("CudaBackend");

    public enum Policy {
        /** Refuse to unload or reload such a model; it keeps serving until the process restarts. */
        REFUSE,
        /** Unload or reload it anyway, logging what stays allocated until the process exits. */
        LEAK
    }

    private final Policy policy;

    public UnreleasedDeviceMemory(Policy policy) {
        this.policy = policy;
    }

    public Policy policy() {
        return policy;
    }

    /**
     * Why {@code model}'s serving version may not be retired (only under {@link Policy#REFUSE}),
     * empty when it may. {@code what} is the operation, for the message ("unload", "reload").
     */
    public Optional<String> refusal(String model, ModelDescription served, String placement, String what) {
        Optional<String> delegate = keeping(served);
        if (delegate.isEmpty() || policy == Policy.LEAK || !placement.startsWith("cuda")) {
            return Optional.empty();
        }
        return Optional.of("cannot " + what + " '" + model + "': it uses ExecuTorch's " + delegate.get()
                + ", which keeps each instance's device memory (weights and workspace) until the process exits;"
                + " restart the service to replace it, or set etserve.repository.unreleased-device-memory=leak to "
                + what + " it anyway");
    }

    /** The log line for a version retired under {@link Policy#LEAK}, empty when nothing stays behind. */
    public Optional<String> leakNotice(String model, String version, ModelDescription served, String placement,
            int instances) {
        return keeping(served).filter(d -> placement.startsWith("cuda")).map(d -> String.format(Locale.ROOT,
                "model %s version %s unloaded, but %d instance(s) of ExecuTorch's %s keep their device memory on %s"
                        + " until the process exits (etserve.repository.unreleased-device-memory=leak)",
                model, version, instances, d, placement));
    }

    private static Optional<String> keeping(ModelDescription served) {
        return DELEGATES.stream().filter(served.signature()::usesBackend).findFirst();
    }
}
