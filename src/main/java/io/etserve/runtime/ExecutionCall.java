package io.etserve.runtime;

import java.util.Arrays;
import java.util.List;

/**
 * One forward call as {@link NativeBridge#execute} takes it: the inputs, the stream options and
 * where outputs go, and how the call's completion wait ended once it returns. Each
 * {@link ProgramInstance} owns one and reuses it for every call (its calls never overlap), so
 * handing a call to the bridge allocates nothing. The bridge reads and writes these fields by
 * name (native/src/jni_bridge.cpp, {@code JavaTypes}): rename them on both sides.
 */
final class ExecutionCall {

    /** This call's inputs: the first {@link #inputCount} entries, each read from its buffer's address. */
    ExecutionInput[] inputs = new ExecutionInput[0];
    int inputCount;
    /** Where the bridge asks for each output's direct buffer. */
    OutputBuffers buffers;

    // The call's StreamSelection, enums as their ordinals (the bridge's StreamMode and CompletionWait).
    int streamMode;
    long stream;
    int device;
    int completionWait;
    int sleepSliceMicros;
    int waitTimeoutMillis;

    /** Written by the bridge when the call succeeds: a {@link CompletionWaits.Ended} ordinal. */
    int waitEnded;

    void start(List<ExecutionInput> in, StreamSelection selection, OutputBuffers outputs) {
        int n = in.size();
        if (inputs.length < n) {
            inputs = new ExecutionInput[n];
        }
        for (int i = 0; i < n; i++) {
            ExecutionInput input = in.get(i);
            // An input's buffer starts at position 0 (ExecutionInput slices it); one whose
            // position moved since goes as its readable window, as the bridge reads from index 0.
            inputs[i] = input.data().position() == 0 ? input
                    : new ExecutionInput(input.data(), input.scalarType(), input.shape());
        }
        inputCount = n;
        buffers = outputs;
        streamMode = selection.mode().ordinal();
        stream = selection.handle();
        device = selection.device();
        completionWait = selection.completionWait().ordinal();
        sleepSliceMicros = selection.sleepSliceMicros();
        waitTimeoutMillis = selection.waitTimeoutMillis();
        waitEnded = CompletionWaits.Ended.NONE.ordinal();
    }

    /** Lets go of the call's inputs and output buffers (request memory), keeping the holder. */
    void finish() {
        Arrays.fill(inputs, null);
        inputCount = 0;
        buffers = null;
    }

    /** How the call's adaptive completion wait ended; {@code NONE} when it failed or waited otherwise. */
    CompletionWaits.Ended waitEnded() {
        return CompletionWaits.Ended.ofNative(waitEnded);
    }
}
