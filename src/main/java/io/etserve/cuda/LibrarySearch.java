package io.etserve.cuda;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;
import org.bytedeco.javacpp.ClassProperties;
import org.bytedeco.javacpp.Loader;

/**
 * Whether a shared library is on this host where the dynamic linker or JavaCPP would find it,
 * found without loading anything: the directories of {@code LD_LIBRARY_PATH},
 * {@code java.library.path} and JavaCPP's {@code org.bytedeco.javacpp.platform.preloadpath} and
 * {@code linkpath}, the linker's cache ({@code /etc/ld.so.cache}), the usual system and CUDA
 * directories, a jar on the class path that bundles it, and last (read only when all that found
 * nothing) the link and preload paths the binding's JavaCPP preset names for this platform.
 * Loading a JavaCPP binding only to learn that its library is missing can cost far more than
 * looking: TensorRT's loads the CUDA libraries it depends on first (cuBLAS, NVRTC, cuDNN's
 * bindings), on a host without TensorRT (bench/results/2026-12-05-h100-startup-tensorrt.md).
 */
final class LibrarySearch {

    static final Path LINKER_CACHE = Path.of("/etc/ld.so.cache");
    private static final List<String> SYSTEM_DIRS = List.of("/lib", "/usr/lib", "/lib64", "/usr/lib64",
            "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu", "/usr/local/lib", "/usr/local/cuda/lib64");

    private final List<Path> dirs;
    private final Path linkerCache;
    private final ClassLoader classes;
    /** More directories, asked for only when the rest found nothing (reading them costs more). */
    private final Supplier<List<Path>> lastResort;

    LibrarySearch(List<Path> dirs, Path linkerCache, ClassLoader classes, Supplier<List<Path>> lastResort) {
        this.dirs = List.copyOf(dirs);
        this.linkerCache = linkerCache;
        this.classes = classes;
        this.lastResort = lastResort;
    }

    LibrarySearch(List<Path> dirs, Path linkerCache, ClassLoader classes) {
        this(dirs, linkerCache, classes, List::of);
    }

    /**
     * Where this process's linker and JavaCPP look for a library of the JavaCPP preset
     * {@code preset} (a class name, such as {@code org.bytedeco.tensorrt.presets.nvinfer}).
     */
    static LibrarySearch ofThisProcess(String preset) {
        Set<Path> dirs = new LinkedHashSet<>();
        addPath(dirs, System.getenv("LD_LIBRARY_PATH"), ":");
        addPath(dirs, System.getProperty("java.library.path"), File.pathSeparator);
        addPath(dirs, System.getProperty("org.bytedeco.javacpp.platform.preloadpath"), File.pathSeparator);
        addPath(dirs, System.getProperty("org.bytedeco.javacpp.platform.linkpath"), File.pathSeparator);
        SYSTEM_DIRS.forEach(d -> dirs.add(Path.of(d)));
        // Toolkits installed from NVIDIA's archives (the directories JavaCPP's bindings also name
        // as their run path): /usr/local/TensorRT-10.x/lib, /usr/local/tensorrt/lib,
        // /usr/local/cuda-13.x/targets/*/lib.
        try (DirectoryStream<Path> local = Files.newDirectoryStream(Path.of("/usr/local"),
                "{TensorRT*,tensorrt*,cuda-*}")) {
            for (Path p : local) {
                dirs.add(p.resolve("lib"));
                dirs.add(p.resolve("lib64"));
                dirs.add(p.resolve("targets/x86_64-linux/lib"));
                dirs.add(p.resolve("targets/sbsa-linux/lib"));
            }
        } catch (IOException | RuntimeException e) {
            // no /usr/local: nothing more to look at
        }
        ClassLoader classes = LibrarySearch.class.getClassLoader();
        return new LibrarySearch(new ArrayList<>(dirs), LINKER_CACHE, classes, () -> presetPaths(preset, classes));
    }

    /**
     * The link and preload paths {@code preset} names for this platform, as JavaCPP reads them
     * (its annotations: the class is loaded, not initialized, so no binding loads); none when the
     * preset is not there.
     */
    static List<Path> presetPaths(String preset, ClassLoader classes) {
        Set<Path> dirs = new LinkedHashSet<>();
        try {
            ClassProperties properties = Loader.loadProperties(Class.forName(preset, false, classes),
                    Loader.loadProperties(), true);
            for (String key : List.of("platform.linkpath", "platform.preloadpath")) {
                for (String dir : properties.get(key)) {
                    addPath(dirs, dir, File.pathSeparator);
                }
            }
        } catch (ClassNotFoundException | RuntimeException | LinkageError e) {
            // no preset, or one JavaCPP cannot read: the bindings would not load either
        }
        return new ArrayList<>(dirs);
    }

    private static void addPath(Set<Path> into, String path, String separator) {
        if (path == null) {
            return;
        }
        for (String d : path.split(separator)) {
            if (!d.isBlank()) {
                try {
                    into.add(Path.of(d));
                } catch (RuntimeException e) {
                    // not a path: the linker would not find anything there either
                }
            }
        }
    }

    /**
     * Whether {@code fileName} (a soname such as {@code libnvinfer.so.10}) is in one of the
     * directories, named in the linker's cache, or a class-path resource {@code bundled}.
     */
    boolean finds(String fileName, String bundled) {
        return inAny(dirs, fileName) || inLinkerCache(fileName)
                || (bundled != null && classes.getResource(bundled) != null) || inAny(lastResort.get(), fileName);
    }

    private static boolean inAny(List<Path> dirs, String fileName) {
        for (Path dir : dirs) {
            if (Files.exists(dir.resolve(fileName))) {
                return true;
            }
        }
        return false;
    }

    /** The linker's cache holds each library's soname and path as NUL-terminated strings. */
    private boolean inLinkerCache(String fileName) {
        byte[] cache;
        try {
            cache = Files.readAllBytes(linkerCache);
        } catch (IOException | RuntimeException e) {
            return false;
        }
        byte[] name = fileName.getBytes(StandardCharsets.US_ASCII);
        outer:
        for (int i = 1; i + name.length < cache.length; i++) {
            if (cache[i + name.length] != 0 || (cache[i - 1] != 0 && cache[i - 1] != '/')) {
                continue;
            }
            for (int j = 0; j < name.length; j++) {
                if (cache[i + j] != name[j]) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }

    /** Where it looked, for a message. */
    String where() {
        return "looked in LD_LIBRARY_PATH, java.library.path, " + linkerCache + ", the system's and CUDA's library"
                + " directories, the class path and JavaCPP's paths";
    }
}
