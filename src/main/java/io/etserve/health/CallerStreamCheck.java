package io.etserve.health;

import io.etserve.runtime.CallerStreamInspector;
import io.etserve.runtime.CallerStreamInspector.Definer;
import java.util.List;
import java.util.function.Supplier;

/**
 * Exactly one loaded object may define ExecuTorch's {@code getCallerStream}: two copies give
 * two thread-local selections and stream ordering breaks without a crash. Zero means the
 * bridge, which links the library, is not what this build should be.
 */
public final class CallerStreamCheck {

    public record Result(boolean ok, List<Definer> definers) {
        public String summary() {
            if (definers.size() == 1) {
                return "one caller-stream library: " + definers.get(0).path() + " (" + definers.get(0).soname() + ")";
            }
            if (definers.isEmpty()) {
                return "no loaded object defines ExecuTorch's getCallerStream; the bridge must link libextension_cuda.so";
            }
            return definers.size() + " loaded objects define ExecuTorch's getCallerStream, so delegates and the runner"
                    + " see different stream selections: " + definers.stream().map(d -> d.path() + " (" + d.soname() + ")").toList();
        }
    }

    private final Supplier<List<Definer>> scan;
    private volatile Result last;

    public CallerStreamCheck() {
        this(CallerStreamInspector::definers);
    }

    CallerStreamCheck(Supplier<List<Definer>> scan) {
        this.scan = scan;
    }

    /**
     * Walks the loaded objects now, so a library loaded since is caught too. Probes call this;
     * the request path reads {@link #lastResult()}: the walk costs several forward calls of a
     * small model (bench/results/2026-12-02-2core-rest-vs-inprocess.md).
     */
    public Result check() {
        List<Definer> definers = scan.get();
        Result r = new Result(definers.size() == 1, definers);
        last = r;
        return r;
    }

    /** The most recent probe's result (scanning once if there was none). */
    public Result lastResult() {
        Result r = last;
        return r != null ? r : check();
    }
}
