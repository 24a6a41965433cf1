package io.etserve.bench;

import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import io.etserve.runtime.TensorSpec;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Resident memory of N instances of one program (bench/weights-once.sh): loads the program
 * (with every .ptd beside it), creates N instances, runs one call on each, prints VmRSS.
 * Usage: InstanceMemory MODEL_DIR/1/model.pte N
 */
public final class InstanceMemory {

    private InstanceMemory() {}

    /** This process's resident memory (VmRSS), KiB. */
    public static long rssKb() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IllegalStateException("no VmRSS");
    }

    public static void main(String[] args) throws IOException {
        Path pte = Path.of(args[0]);
        int n = Integer.parseInt(args[1]);
        List<Path> data;
        try (var files = Files.list(pte.toAbsolutePath().getParent())) {
            data = files.filter(f -> f.toString().endsWith(".ptd")).sorted().toList();
        }
        long bytes = Files.size(pte);
        for (Path p : data) {
            bytes += Files.size(p);
        }
        io.etserve.runtime.NativeRuntime.ensureLoaded();
        long base = rssKb();
        List<ProgramInstance> instances = new ArrayList<>();
        try (Program program = Program.load(pte, Program.Verification.MINIMAL, data)) {
            long loaded = rssKb();
            for (int i = 0; i < n; i++) {
                ProgramInstance instance = program.newInstance("forward");
                instances.add(instance);
                TensorSpec in = instance.signature().inputs().get(0);
                long elements = 1;
                for (long d : in.sizes()) {
                    elements *= d;
                }
                ByteBuffer zeros = ByteBuffer.allocateDirect(Math.toIntExact(elements * 4));
                instance.execute(List.of(new ExecutionInput(zeros, in.scalarType(), in.sizes())), StreamSelection.none());
            }
            long end = rssKb();
            instances.forEach(ProgramInstance::close);
            program.close();
            long closed = rssKb();
            System.out.printf("{\"program\":\"%s\",\"file_bytes\":%d,\"instances\":%d,\"rss_runtime_kb\":%d,"
                    + "\"rss_program_kb\":%d,\"rss_kb\":%d,\"instances_add_kb\":%d,\"rss_after_close_kb\":%d}%n",
                    pte.getParent().getParent().getFileName(), bytes, n, base, loaded, end, end - loaded, closed);
        }
    }
}
