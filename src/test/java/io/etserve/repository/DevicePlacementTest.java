package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.modelconfig.ModelConfig;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class DevicePlacementTest {

    static final List<Integer> TWO = List.of(0, 1);

    static List<Integer> place(List<String> backends, Optional<List<Integer>> requested, List<Integer> served,
            DevicePlacement.Policy policy, int index) {
        return DevicePlacement.choose("m", backends, requested, served, policy, index);
    }

    @Test
    void spreadPutsWholeModelsOnDevicesInTurn() {
        assertThat(place(List.of(), Optional.empty(), TWO, DevicePlacement.Policy.SPREAD, 0)).containsExactly(0);
        assertThat(place(List.of(), Optional.empty(), TWO, DevicePlacement.Policy.SPREAD, 1)).containsExactly(1);
        assertThat(place(List.of(), Optional.empty(), TWO, DevicePlacement.Policy.SPREAD, 2)).containsExactly(0);
        assertThat(place(List.of(), Optional.empty(), List.of(3), DevicePlacement.Policy.SPREAD, 5)).containsExactly(3);
    }

    @Test
    void allAndExplicitLists() {
        assertThat(place(List.of(), Optional.empty(), TWO, DevicePlacement.Policy.ALL, 7)).containsExactly(0, 1);
        assertThat(place(List.of(), Optional.of(ModelConfig.ALL_DEVICES), TWO, DevicePlacement.Policy.SPREAD, 0))
                .containsExactly(0, 1);
        assertThat(place(List.of(), Optional.of(List.of(1, 1)), TWO, DevicePlacement.Policy.SPREAD, 0))
                .containsExactly(1);
        assertThat(place(List.of(), Optional.of(List.of(1)), List.of(), DevicePlacement.Policy.SPREAD, 0)).isEmpty();
    }

    @Test
    void unservedDevicesAreRefused() {
        assertThatThrownBy(() -> place(List.of(), Optional.of(List.of(2)), TWO, DevicePlacement.Policy.SPREAD, 0))
                .isInstanceOf(DevicePlacement.PlacementException.class).hasMessageContaining("device 2");
    }

    @Test
    void cudaBackendGoesToDeviceZeroOnly() {
        List<String> aoti = List.of("CudaBackend");
        // The policy would have put it on device 1: it is pinned to device 0 instead.
        assertThat(place(aoti, Optional.empty(), TWO, DevicePlacement.Policy.SPREAD, 1)).containsExactly(0);
        assertThat(place(aoti, Optional.empty(), TWO, DevicePlacement.Policy.ALL, 0)).containsExactly(0);
        assertThatThrownBy(() -> place(aoti, Optional.of(List.of(1)), TWO, DevicePlacement.Policy.SPREAD, 0))
                .isInstanceOf(DevicePlacement.PlacementException.class).hasMessageContaining("device 0 only");
        assertThatThrownBy(() -> place(aoti, Optional.empty(), List.of(1), DevicePlacement.Policy.SPREAD, 0))
                .isInstanceOf(DevicePlacement.PlacementException.class);
    }

    @Test
    void tensorRtMustBePinnedToOneDevice() {
        List<String> trt = List.of("TensorRTBackend");
        assertThat(place(trt, Optional.of(List.of(1)), TWO, DevicePlacement.Policy.SPREAD, 0)).containsExactly(1);
        assertThatThrownBy(() -> place(trt, Optional.empty(), TWO, DevicePlacement.Policy.ALL, 0))
                .isInstanceOf(DevicePlacement.PlacementException.class).hasMessageContaining("TensorRTBackend");
        assertThatThrownBy(() -> place(trt, Optional.of(ModelConfig.ALL_DEVICES), TWO, DevicePlacement.Policy.SPREAD, 0))
                .isInstanceOf(DevicePlacement.PlacementException.class);
    }
}
