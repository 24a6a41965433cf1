package io.etserve.execution;

import java.util.OptionalInt;

/** Told of every runtime failure and the device the call ran on, if any. */
@FunctionalInterface
public interface FaultListener {
    void onRuntimeFailure(OptionalInt device, Throwable error);

    FaultListener NONE = (device, error) -> {};
}
