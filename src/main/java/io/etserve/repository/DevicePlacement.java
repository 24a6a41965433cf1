package io.etserve.repository;

import io.etserve.modelconfig.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Which devices a model's instances go to. A model's {@code config.yml} may list them
 * ({@code devices: [0, 1]}) or ask for every served device ({@code devices: all}); otherwise the
 * node's policy decides: {@code spread} puts whole models on devices in turn, {@code all} puts
 * instances of every model on every device.
 *
 * <p>Placements that cannot work are refused at load, with the reason, rather than failing at
 * the first request: ExecuTorch's CUDA/AOTI delegate copies at its boundaries on device 0 only,
 * and a TensorRT engine runs on the device it was built for, so it must be pinned to one.
 */
public final class DevicePlacement {

    public enum Policy {
        SPREAD,
        ALL
    }

    private DevicePlacement() {}

    /**
     * @param requested the model's {@code devices}: empty = policy; a list (possibly {@code [-1]}
     *     meaning "all")
     * @param served devices that have stream pools, ascending
     * @param modelIndex the model's position in load order (for SPREAD)
     * @throws PlacementException when the placement cannot work
     */
    public static List<Integer> choose(String model, List<String> backends, Optional<List<Integer>> requested,
            List<Integer> served, Policy policy, int modelIndex) {
        if (served.isEmpty()) {
            return List.of();
        }
        List<Integer> devices;
        if (requested.isPresent() && !requested.get().equals(ModelConfig.ALL_DEVICES)) {
            devices = new ArrayList<>();
            for (int d : requested.get()) {
                if (!served.contains(d)) {
                    throw new PlacementException("model '" + model + "' is placed on device " + d
                            + ", which this node does not serve (served devices: " + served + ")");
                }
                if (!devices.contains(d)) {
                    devices.add(d);
                }
            }
        } else if (requested.isPresent() || policy == Policy.ALL) {
            devices = List.copyOf(served);
        } else {
            devices = List.of(served.get(Math.floorMod(modelIndex, served.size())));
        }
        if (backends.contains(NodeCapabilities.CUDA_BACKEND) && !devices.equals(List.of(0))) {
            if (requested.isPresent() || !served.contains(0)) {
                throw new PlacementException("model '" + model + "' uses CudaBackend, whose boundary copies accept"
                        + " device 0 only; place it with devices: [0] (asked for " + devices + ")");
            }
            devices = List.of(0);
        }
        if (backends.contains(NodeCapabilities.TENSORRT_BACKEND) && devices.size() > 1) {
            throw new PlacementException("model '" + model + "' uses TensorRTBackend, whose engine runs on the"
                    + " device it was built for; pin it to that one device with devices: [N] (asked for " + devices
                    + ")");
        }
        return devices;
    }

    /** The requested placement cannot work; the model fails to load with this message. */
    public static final class PlacementException extends RuntimeException {
        public PlacementException(String message) {
            super(message);
        }
    }
}
