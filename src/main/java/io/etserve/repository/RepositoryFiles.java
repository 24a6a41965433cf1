package io.etserve.repository;

import io.etserve.inference.ModelNames;
import io.etserve.modelconfig.ModelConfig;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryIteratorException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the registry reads the repository's directories: their entries in name order, and what a
 * model directory holds ({@link Snapshot}), which the poll mode compares from one poll to the
 * next and each loaded version keeps, to tell whether its files changed since.
 */
final class RepositoryFiles {

    private static final Logger log = LoggerFactory.getLogger(RepositoryFiles.class);

    /**
     * Names, sizes, modification times and file ids of a model's config.yml and of the files of
     * each version directory: what the poll mode compares. Other files and directories (a
     * {@code .staging} directory a version is written in before it is renamed into place) are
     * not part of it.
     */
    record Snapshot(String config, SortedMap<Long, String> versions) {
        /** The files a load of {@code version} reads. */
        String files(long version) {
            return config + "\n" + versions.get(version);
        }
    }

    private RepositoryFiles() {}

    /** What a model directory holds now; a directory that cannot be read counts as empty (logged). */
    static Snapshot snapshot(Path modelDir) {
        try {
            return snapshot(modelDir, RepositoryFiles::entries);
        } catch (IOException e) {
            throw new UncheckedIOException(e);  // entries() logs what it cannot read and throws nothing
        }
    }

    /**
     * As {@link #snapshot(Path)}, but throws when the model's directory or a version directory
     * cannot be read (the poll's: an unreadable directory is not an empty one).
     */
    static Snapshot readSnapshot(Path modelDir) throws IOException {
        return snapshot(modelDir, RepositoryFiles::readEntries);
    }

    /** {@code dir}'s entries in name order, or none (logged) when it cannot be read. */
    static List<Path> entries(Path dir) {
        try {
            return readEntries(dir);
        } catch (IOException e) {
            log.error("cannot list {}: {}", dir, e.getMessage());
            return List.of();
        }
    }

    /** {@code dir}'s entries in name order; throws when it cannot be read. */
    static List<Path> readEntries(Path dir) throws IOException {
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir)) {
            for (Path p : s) {
                out.add(p);
            }
        } catch (DirectoryIteratorException e) {
            throw e.getCause();
        }
        out.sort(Comparator.naturalOrder());
        return out;
    }

    /** A directory's entries in name order. */
    private interface Lister {
        List<Path> list(Path dir) throws IOException;
    }

    private static Snapshot snapshot(Path modelDir, Lister lister) throws IOException {
        TreeMap<Long, String> versions = new TreeMap<>();
        for (Path dir : lister.list(modelDir)) {
            String version = dir.getFileName().toString();
            if (ModelNames.isValidVersion(version) && Files.isDirectory(dir)) {
                StringBuilder b = new StringBuilder();
                for (Path f : lister.list(dir)) {
                    b.append(describe(f));
                }
                versions.put(Long.parseLong(version), b.toString());
            }
        }
        return new Snapshot(describe(modelDir.resolve(ModelConfig.FILE_NAME)), versions);
    }

    /** One file's name, size, modification time and file id (a file replaced by a rename has another). */
    private static String describe(Path f) {
        try {
            BasicFileAttributes a = Files.readAttributes(f, BasicFileAttributes.class);
            if (!a.isRegularFile()) {
                return "";
            }
            return f.getFileName() + ":" + a.size() + ":" + a.lastModifiedTime().to(TimeUnit.NANOSECONDS) + ":"
                    + a.fileKey() + "\n";
        } catch (IOException e) {
            return f.getFileName() + ":-\n";
        }
    }
}
