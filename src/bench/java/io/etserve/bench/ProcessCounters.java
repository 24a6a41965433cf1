package io.etserve.bench;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * What another process's CPU per call is made of: user and kernel time, minor page faults and
 * context switches (/proc/PID/stat, and /proc/PID/task/TID/status summed over the threads alive
 * at the snapshot). The same CPU per call can be slow code (user), system calls and wake-ups
 * (system time, switches) or memory first touched (faults): the split says which to chase.
 */
record ProcessCounters(long userTicks, long systemTicks, long minorFaults, long voluntarySwitches,
        long involuntarySwitches) {

    /** The counters now; empty when the process is gone (or this is not Linux). */
    static Optional<ProcessCounters> read(long pid) {
        Path proc = Path.of("/proc", Long.toString(pid));
        try {
            String[] f = ThreadCpu.statFields(Files.readString(proc.resolve("stat")));
            long voluntary = 0;
            long involuntary = 0;
            try (DirectoryStream<Path> tasks = Files.newDirectoryStream(proc.resolve("task"))) {
                for (Path task : tasks) {
                    try {
                        for (String line : Files.readAllLines(task.resolve("status"))) {
                            if (line.startsWith("voluntary_ctxt_switches:")) {
                                voluntary += Long.parseLong(line.substring(line.indexOf(':') + 1).strip());
                            } else if (line.startsWith("nonvoluntary_ctxt_switches:")) {
                                involuntary += Long.parseLong(line.substring(line.indexOf(':') + 1).strip());
                            }
                        }
                    } catch (IOException | RuntimeException e) {
                        // the thread ended while we looked
                    }
                }
            }
            // minflt is field 10, utime 14, stime 15 (ThreadCpu.statFields)
            return Optional.of(new ProcessCounters(Long.parseLong(f[11]), Long.parseLong(f[12]), Long.parseLong(f[7]),
                    voluntary, involuntary));
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    /** utime + stime, in clock ticks. */
    long cpuTicks() {
        return userTicks + systemTicks;
    }

    /**
     * Per call since {@code before}: "user 310 sys 95 us, 0.4 minor faults, 3.1 + 0.0 context
     * switches (voluntary + involuntary)". Switches count only threads alive at both snapshots'
     * reading, so a thread that ended in between makes them approximate, never the CPU times.
     */
    String perCallSince(ProcessCounters before, long calls) {
        double n = Math.max(1, calls);
        double usPerTick = 1e6 / ThreadCpu.TICKS_PER_SECOND;
        return String.format("user %.0f sys %.0f us, %.1f minor faults, %.1f + %.1f context switches",
                (userTicks - before.userTicks) * usPerTick / n, (systemTicks - before.systemTicks) * usPerTick / n,
                (minorFaults - before.minorFaults) / n, (voluntarySwitches - before.voluntarySwitches) / n,
                (involuntarySwitches - before.involuntarySwitches) / n);
    }
}
