package io.etserve.runtime;

/** One output of a forward call, copied out of the Module's memory by the bridge. */
public record ExecutionOutput(int scalarType, long[] shape, byte[] data) {}
