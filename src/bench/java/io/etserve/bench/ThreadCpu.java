package io.etserve.bench;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Where another process's CPU went, by thread kind: a snapshot of utime + stime of every thread
 * under /proc/PID/task, grouped by the thread's name with its numbers blanked ("qtp1234-17" and
 * "qtp1234-18" are both "qtp#-#"). The difference of two snapshots, divided by the calls served
 * between them, tells whether request threads, the JIT, the GC or a waiting thread pays per call.
 * Threads that end between the snapshots (the JIT's compiler threads come and go with its queue)
 * are counted together as "ended", from the process's own total, which keeps their time.
 */
final class ThreadCpu {

    /** USER_HZ: clock ticks per second in /proc on every x86-64 kernel ABI. */
    static final long TICKS_PER_SECOND = 100;

    private final Map<Long, Long> ticksByThread;
    private final Map<Long, String> kindByThread;
    /** The whole process's, ended threads included; -1 when it could not be read. */
    private final long processTicks;

    private ThreadCpu(Map<Long, Long> ticksByThread, Map<Long, String> kindByThread, long processTicks) {
        this.ticksByThread = ticksByThread;
        this.kindByThread = kindByThread;
        this.processTicks = processTicks;
    }

    static ThreadCpu snapshot(long pid) {
        Map<Long, Long> ticks = new HashMap<>();
        Map<Long, String> kinds = new HashMap<>();
        long process;
        try {
            process = cpuTicks(Files.readString(Path.of("/proc", Long.toString(pid), "stat")));
        } catch (IOException | RuntimeException e) {
            process = -1;
        }
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                try {
                    String stat = Files.readString(task.resolve("stat"));
                    long tid = Long.parseLong(task.getFileName().toString());
                    ticks.put(tid, cpuTicks(stat));
                    kinds.put(tid, kind(stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'))));
                } catch (IOException | RuntimeException e) {
                    // the thread ended while we looked
                }
            }
        } catch (IOException e) {
            // not Linux, or the process is gone: an empty snapshot
        }
        return new ThreadCpu(ticks, kinds, process);
    }

    /**
     * utime + stime, in clock ticks, from a /proc/PID/stat or /proc/PID/task/TID/stat line: fields 14
     * and 15, counted after the parenthesised command name (which may hold spaces).
     */
    static long cpuTicks(String stat) {
        String[] f = statFields(stat);
        return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }

    /**
     * The fields of a /proc stat line after the parenthesised command name (which may hold
     * spaces): [0] is field 3 (state), so field N is [N - 3].
     */
    static String[] statFields(String stat) {
        return stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    }

    static String kind(String threadName) {
        return threadName.replaceAll("[0-9]+", "#").strip();
    }

    /**
     * Microseconds of CPU per call by thread kind since {@code before}, largest first, as
     * "qtp#-#=310 C# CompilerThre#=40 ended=25 ..." (kinds under 1 % of the total left out).
     */
    String perCallSince(ThreadCpu before, long calls) {
        Map<String, Long> byKind = new HashMap<>();
        ticksByThread.forEach((tid, now) -> {
            long then = before.ticksByThread.getOrDefault(tid, 0L);
            // fewer ticks than before: the id went to a new thread, all of whose time is new
            byKind.merge(kindByThread.get(tid), now >= then ? now - then : now, Long::sum);
        });
        long live = byKind.values().stream().mapToLong(Long::longValue).sum();
        if (processTicks >= 0 && before.processTicks >= 0) {
            // What the process spent that no thread alive now accounts for (read a moment apart:
            // a tick or two of noise either way).
            byKind.put("ended", Math.max(0, processTicks - before.processTicks - live));
        }
        long total = byKind.values().stream().mapToLong(Long::longValue).sum();
        double usPerTick = 1e6 / TICKS_PER_SECOND;
        return byKind.entrySet().stream()
                .filter(e -> e.getValue() > 0 && e.getValue() * 100 >= total)
                .sorted(Map.Entry.<String, Long>comparingByValue().reversed())
                .map(e -> String.format("%s=%.0f", e.getKey(), e.getValue() * usPerTick / Math.max(1, calls)))
                .collect(Collectors.joining(" "));
    }
}
