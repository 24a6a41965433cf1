package io.etserve.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.stream.Stream;

/** Builds a model repository in a temp dir from committed models plus deliberately broken ones. */
public final class ModelRepositoryFixture {

    private final Path root;

    private ModelRepositoryFixture(Path root) {
        this.root = root;
    }

    public static ModelRepositoryFixture create(String prefix) {
        try {
            return new ModelRepositoryFixture(Files.createTempDirectory(prefix));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public Path root() {
        return root;
    }

    /** Copies {@code source/<name>} (config and versions) into the repository. */
    public ModelRepositoryFixture copy(Path source, String name) {
        copyTree(source.resolve(name), root.resolve(name));
        return this;
    }

    /** Copies {@code source/<name>} into the repository as {@code as}. */
    public ModelRepositoryFixture copy(Path source, String name, String as) {
        copyTree(source.resolve(name), root.resolve(as));
        return this;
    }

    /**
     * The caller-stream probe as {@code name} with one instance: x = [0, host milliseconds] holds
     * that instance as long as asked, so tests can keep a request in flight or overload the model.
     * Needs the probe delegate (etserve.native.extra-libraries = TestPaths.probeDelegate()).
     */
    public ModelRepositoryFixture withSlowProbe(String name) {
        return copy(TestPaths.testModels(), "caller-stream-probe", name).withFile(name + "/config.yml",
                "inputs: [ { name: x } ]\noutputs: [ { name: observed } ]\ninstances: 1\n");
    }

    /** A model whose version 1 holds the given bytes as model.pte. */
    public ModelRepositoryFixture withProgramBytes(String name, byte[] bytes) {
        try {
            Path dir = Files.createDirectories(root.resolve(name).resolve("1"));
            Files.write(dir.resolve("model.pte"), bytes);
            return this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public ModelRepositoryFixture withFile(String relative, String content) {
        try {
            Path p = root.resolve(relative);
            Files.createDirectories(p.getParent());
            Files.writeString(p, content);
            return this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The usual broken models: corrupt, truncated, empty, not a program, bad config. */
    public ModelRepositoryFixture withBrokenModels(Path goodProgram) {
        try {
            byte[] good = Files.readAllBytes(goodProgram);
            byte[] corrupt = good.clone();
            for (int i = 64; i < Math.min(corrupt.length, 4096); i += 5) {
                corrupt[i] = (byte) 0x5A;
            }
            withProgramBytes("broken-corrupt", corrupt);
            withProgramBytes("broken-truncated", Arrays.copyOf(good, good.length / 2));
            withProgramBytes("broken-empty", new byte[0]);
            withProgramBytes("broken-text", "#!/bin/sh\necho not a model\n".getBytes());
            withProgramBytes("broken-config", good);
            withFile("broken-config/config.yml", "method: [unclosed\n");
            withFile("broken-noprogram/1/README.txt", "no model.pte here");
            withProgramBytes("broken-method", good);
            withFile("broken-method/config.yml", "method: nope\n");
            return this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void copyTree(Path from, Path to) {
        try (Stream<Path> walk = Files.walk(from)) {
            for (Path p : walk.toList()) {
                Path target = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(p, target, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
