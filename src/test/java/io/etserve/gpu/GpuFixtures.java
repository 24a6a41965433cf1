package io.etserve.gpu;

import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.NativeRuntime;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import io.etserve.support.TestPaths;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/** Loads the GPU build of the bridge and the probe delegate (see scripts/gpu-suite.sh). */
final class GpuFixtures {

    static final Path PROBE_MODEL = TestPaths.testModels().resolve("caller-stream-probe/1/model.pte");

    private GpuFixtures() {}

    static void loadRuntime() {
        String dir = System.getProperty("etserve.native.library-dir");
        NativeRuntime.load(new NativeRuntime.Options(Optional.ofNullable(dir).map(Path::of),
                Path.of(System.getProperty("java.io.tmpdir"), "etserve-native"), List.of(TestPaths.probeDelegate())));
    }

    /** Runs the probe: [has selection, handle, GPU work queued]. */
    static long[] probe(ProgramInstance probe, StreamSelection selection, float spinMicros) {
        ByteBuffer x = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN).putFloat(spinMicros).putFloat(0)
                .flip();
        byte[] out = probe.execute(List.of(new ExecutionInput(x, 6, new long[] {2})), selection).get(0).toArray();
        ByteBuffer b = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
        return new long[] {b.getLong(), b.getLong(), b.getLong()};
    }
}
