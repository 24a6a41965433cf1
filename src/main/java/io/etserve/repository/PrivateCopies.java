package io.etserve.repository;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where a loaded version's files are served from.
 *
 * <p>Programs and data files are memory-mapped, and the repository is a directory operators write
 * to. A file truncated or rewritten in place under a served model (an interrupted {@code cp},
 * {@code rsync --inplace}, a shell redirect) pulls pages from under running kernels: the JVM dies
 * of SIGBUS, or the model's method metadata silently changes. So each version is served from a
 * private copy, made when it loads into a directory only this process writes, and deleted when
 * the version is unloaded. The copy costs disk (its size, until unload) and load time; the
 * instances of a version still share one mapping of it. A reload reads the repository again.
 * Where the repository is immutable (a read-only volume filled once), copies can be turned off.
 */
public final class PrivateCopies {

    private static final Logger log = LoggerFactory.getLogger(PrivateCopies.class);

    /** One per JVM: several repositories (application contexts) may share a process's folder. */
    private static final AtomicLong COUNTER = new AtomicLong();

    private final Path root;

    private PrivateCopies(Path root) {
        this.root = root;
    }

    /** Serves versions from the repository itself (files must not change while they serve). */
    public static PrivateCopies none() {
        return new PrivateCopies(null);
    }

    /**
     * Copies under {@code base/<pid>-<start time>}. Directories of processes that are gone (a
     * crash, a kill) are removed first, those of an earlier process with this one's pid too: a
     * container's JVM is PID 1 again after a restart, on a {@code /tmp} that outlived it.
     */
    public static PrivateCopies under(Path base) {
        Path root = base.resolve(processKey(ProcessHandle.current()));
        try {
            Files.createDirectories(base);
            try (var entries = Files.list(base)) {
                for (Path stale : entries.filter(PrivateCopies::ofDeadProcess).toList()) {
                    log.info("removing the private copies of an earlier process: {}", stale);
                    deleteTree(stale);
                }
            }
            Files.createDirectories(root);
            Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx------"));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot prepare the private copies of served programs in " + base
                    + " (etserve.repository.private-copy-dir): " + e.getMessage(), e);
        }
        return new PrivateCopies(root);
    }

    /** A process's name for its folder: its pid and when it started, so a reused pid is another name. */
    private static String processKey(ProcessHandle process) {
        return process.pid() + "-" + process.info().startInstant().map(Instant::toEpochMilli).orElse(0L);
    }

    private static boolean ofDeadProcess(Path dir) {
        String name = dir.getFileName().toString();
        if (!Files.isDirectory(dir)) {
            return false;
        }
        if (name.matches("[0-9]{1,10}-[0-9]{1,19}")) {
            long pid = Long.parseLong(name.substring(0, name.indexOf('-')));
            return ProcessHandle.of(pid).filter(ProcessHandle::isAlive).map(p -> !processKey(p).equals(name))
                    .orElse(true);
        }
        if (name.matches("[0-9]{1,10}")) {
            // The layout of earlier releases (the pid alone): this process never makes one.
            long pid = Long.parseLong(name);
            return pid == ProcessHandle.current().pid()
                    || ProcessHandle.of(pid).map(p -> !p.isAlive()).orElse(true);
        }
        return false;
    }

    public boolean enabled() {
        return root != null;
    }

    /** The files a version is served from, and their private directory (deleted on close). */
    public record Copy(Path program, List<Path> dataFiles, Path directory) implements AutoCloseable {
        public Copy {
            dataFiles = List.copyOf(dataFiles);
        }

        @Override
        public void close() {
            if (directory != null) {
                try {
                    deleteTree(directory);
                } catch (IOException e) {
                    log.warn("cannot remove the private copy {}: {}", directory, e.getMessage());
                }
            }
        }
    }

    /**
     * Copies a version's program and data files (or, when copies are off, names the originals).
     * The checks that follow (declared digests, ExecuTorch's verification) read the copy: what is
     * checked is exactly what serves.
     */
    public Copy copy(String model, String version, Path program, List<Path> dataFiles) throws IOException {
        if (root == null) {
            return new Copy(program, dataFiles, null);
        }
        // Names were validated by the repository; the counter keeps reloads of one version apart.
        Path dir = root.resolve(COUNTER.incrementAndGet() + "-" + model + "-" + version);
        Files.createDirectory(dir);
        try {
            Path programCopy = dir.resolve(program.getFileName());
            Files.copy(program, programCopy);
            List<Path> dataCopies = new ArrayList<>(dataFiles.size());
            for (Path data : dataFiles) {
                Path to = dir.resolve(data.getFileName());
                Files.copy(data, to);
                dataCopies.add(to);
            }
            return new Copy(programCopy, dataCopies, dir);
        } catch (IOException | RuntimeException e) {
            deleteTree(dir);
            throw e;
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        Files.walkFileTree(dir, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                Files.delete(file);
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult postVisitDirectory(Path d, IOException e) throws IOException {
                Files.delete(d);
                return FileVisitResult.CONTINUE;
            }
        });
    }
}
