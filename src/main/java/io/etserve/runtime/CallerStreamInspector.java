package io.etserve.runtime;

import java.util.ArrayList;
import java.util.List;

/**
 * Asks the process which loaded objects define ExecuTorch's {@code getCallerStream}, the
 * function behind the one thread-local stream selection. Two definers mean two selections:
 * the runner writes one, a delegate reads the other, and stream ordering breaks silently.
 */
public final class CallerStreamInspector {

    /** A loaded object that defines {@code getCallerStream}. */
    public record Definer(String path, String soname) {}

    /** The calling thread's selection as ExecuTorch reports it. */
    public record Selection(boolean hasValue, long handle) {}

    private CallerStreamInspector() {}

    /** Walks every loaded object ({@code dl_iterate_phdr}); see native/src/bridge_core.cpp. */
    public static List<Definer> definers() {
        NativeRuntime.ensureLoaded();
        String[] flat = NativeBridge.callerStreamDefiners();
        List<Definer> out = new ArrayList<>(flat.length / 2);
        for (int i = 0; i + 1 < flat.length; i += 2) {
            out.add(new Definer(flat[i], flat[i + 1]));
        }
        return out;
    }

    public static Selection observe() {
        NativeRuntime.ensureLoaded();
        long[] v = NativeBridge.observeCallerStream();
        return new Selection(v[0] != 0, v[1]);
    }
}
