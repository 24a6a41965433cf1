package io.etserve.bench;

import io.etserve.repository.PrivateCopies;
import io.etserve.runtime.NativeRuntime;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * What serving a version from a private copy costs ({@link PrivateCopies}): time to a loaded
 * program with one instance, from the repository and from a fresh copy, and the disk the copy
 * takes. One JSON line per way, medians of {@code reps} loads.
 *
 * <pre>
 * java -cp target/test-classes:target/classes:$(cat target/bench/classpath.txt) io.etserve.bench.PrivateCopyCost target/bench-models/heavy-xnnpack-ptd/1 5
 * </pre>
 */
public final class PrivateCopyCost {

    private PrivateCopyCost() {}

    public static void main(String[] args) throws Exception {
        Path version = Path.of(args[0]);
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        NativeRuntime.ensureLoaded();
        Path program = version.resolve("model.pte");
        List<Path> data;
        try (var files = Files.list(version)) {
            data = files.filter(f -> f.toString().endsWith(".ptd")).sorted().toList();
        }
        long bytes = Files.size(program);
        for (Path d : data) {
            bytes += Files.size(d);
        }
        Path base = Files.createTempDirectory("etserve-copy-cost-");
        PrivateCopies copies = PrivateCopies.under(base);
        for (boolean copy : new boolean[] {false, true, false, true}) {
            double[] ms = new double[reps];
            double[] copyMs = new double[reps];
            for (int i = 0; i < reps; i++) {
                long t0 = System.nanoTime();
                try (PrivateCopies.Copy served = copy ? copies.copy("m", "1", program, data)
                        : PrivateCopies.none().copy("m", "1", program, data)) {
                    copyMs[i] = (System.nanoTime() - t0) / 1e6;
                    try (Program p = Program.load(served.program(), Program.Verification.INTERNAL_CONSISTENCY,
                            served.dataFiles()); ProgramInstance instance = p.newInstance("forward")) {
                        ms[i] = (System.nanoTime() - t0) / 1e6;
                    }
                }
            }
            System.out.printf(Locale.ROOT, "{\"files\":\"%s\",\"bytes\":%d,\"private_copy\":%s,\"reps\":%d,"
                    + "\"load_ms_median\":%.1f,\"copy_ms_median\":%.1f}%n", version, bytes, copy, reps, median(ms),
                    copy ? median(copyMs) : 0.0);
        }
        try (var left = Files.list(base)) {
            List<Path> remaining = new ArrayList<>(left.toList());
            System.out.println("{\"copies_left_after_close\":" + remaining.stream().mapToLong(PrivateCopyCost::count).sum() + "}");
        }
    }

    private static long count(Path dir) {
        try (var files = Files.list(dir)) {
            return files.count();
        } catch (java.io.IOException e) {
            return -1;
        }
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }
}
