package io.etserve.execution;

import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;

/** Exclusive use of one Module (and, on a GPU, its stream) for one forward call. */
public final class ExecutionSlot implements AutoCloseable {
    private final ProgramInstance instance;
    private final StreamSelection selection;
    private final Runnable release;
    private boolean closed;

    public ExecutionSlot(ProgramInstance instance, StreamSelection selection, Runnable release) {
        this.instance = instance;
        this.selection = selection;
        this.release = release;
    }

    public ProgramInstance instance() {
        return instance;
    }

    public StreamSelection selection() {
        return selection;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            release.run();
        }
    }
}
