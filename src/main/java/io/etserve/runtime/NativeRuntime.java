package io.etserve.runtime;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Loads the JNI bridge and the ExecuTorch libraries it needs, once per JVM.
 *
 * <p>The jar carries them under {@value #RESOURCE_DIR} with a {@code libraries.txt} listing the
 * load order. They are extracted into a content-addressed directory (or read from
 * {@link Options#libraryDir()} when set, as in the container image) and loaded in that order,
 * so every later library, delegates included, resolves against the same {@code libexecutorch.so}
 * and the same caller-stream library.
 */
public final class NativeRuntime {

    static final String RESOURCE_DIR = "META-INF/etserve/native/linux-x86_64";
    private static final String MANIFEST = "libraries.txt";
    /**
     * Delegates found in the ExecuTorch install at build time (the CUDA wheel's CudaBackend and
     * its AOTI shims), in load order. Loaded after the bridge; one that cannot load on this host
     * (no CUDA driver) is skipped with a warning, and the programs that need it are refused at
     * model load as "delegate not registered".
     */
    static final String DELEGATES = "delegates.list";
    private static final String CUDART = "libcudart.so.13";
    /** rwx------: where extracted libraries live, only their owner may read or change anything. */
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rwx------");
    static final String BRIDGE = "libetserve_jni.so";
    /** The first-call trial's program ({@link FirstCallTrial}), extracted beside the libraries. */
    static final String FIRST_CALL = "etserve-first-call";

    /**
     * @param libraryDir a directory already holding the libraries (skips extraction)
     * @param extractDir where to extract the jar's libraries when {@code libraryDir} is empty
     * @param extraLibraries more delegate libraries to load after the bridge (they register by name)
     */
    public record Options(Optional<Path> libraryDir, Path extractDir, List<Path> extraLibraries) {
        public Options {
            extraLibraries = List.copyOf(extraLibraries);
        }

        public static Options defaults() {
            return new Options(Optional.empty(), Path.of(System.getProperty("java.io.tmpdir"), "etserve-native"),
                    List.of());
        }
    }

    /** What was loaded, from where: for health details and logs. */
    public record Info(Path directory, Map<String, Path> libraries, List<String> registeredBackends) {}

    private static Info info;
    /** Libraries loaded after the bridge (delegates, extras), in load order: a trial process loads them too. */
    private static final List<Path> loadedAfterBridge = new ArrayList<>();
    /** The CPU threadpool's size once fixed (0 before): by the first sizing or program, whichever comes first. */
    private static int cpuThreads;

    private NativeRuntime() {}

    /** Loads with {@link Options#defaults()} unless already loaded. */
    public static void ensureLoaded() {
        load(Options.defaults());
    }

    /**
     * Loads the libraries; later calls return the first result (a JVM can load them once).
     *
     * @throws NativeLibraryException with one sentence naming what failed and how to fix it
     */
    public static synchronized Info load(Options options) {
        if (info != null) {
            loadExtras(options.extraLibraries(), info.libraries());
            return info();
        }
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "");
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new NativeLibraryException("The ExecuTorch bridge is built for Linux x86-64 only; this JVM runs on "
                    + os + "/" + arch + ".", null);
        }
        Path dir = options.libraryDir().orElseGet(() -> extract(options.extractDir()));
        List<String> order = readManifest(dir);
        Map<String, Path> loaded = new LinkedHashMap<>();
        for (String name : order) {
            Path file = name.equals(CUDART) ? systemCudaRuntime().orElse(dir.resolve(name)) : dir.resolve(name);
            loadOne(name, file, dir);
            loaded.put(name, file);
        }
        loadDelegates(dir, loaded);
        loadExtras(options.extraLibraries(), loaded);
        info = new Info(dir, loaded, List.of());
        return info();
    }

    private static List<String> lines(byte[] text) {
        return new String(text, StandardCharsets.UTF_8).lines().map(String::strip).filter(s -> !s.isEmpty()).toList();
    }

    /** The build's delegates ({@value #DELEGATES}); a host that cannot load one goes on without it. */
    private static void loadDelegates(Path dir, Map<String, Path> loaded) {
        Path list = dir.resolve(DELEGATES);
        if (!Files.isRegularFile(list)) {
            return;
        }
        List<String> names;
        try {
            names = lines(Files.readAllBytes(list));
        } catch (IOException e) {
            throw new NativeLibraryException("Cannot read " + list + ": " + e.getMessage(), e);
        }
        for (String name : names) {
            Path file = dir.resolve(name);
            try {
                System.load(file.toAbsolutePath().toString());
                loaded.put(name, file);
                loadedAfterBridge.add(file.toAbsolutePath());
            } catch (UnsatisfiedLinkError e) {
                org.slf4j.LoggerFactory.getLogger(NativeRuntime.class).warn(
                        "delegate library {} is not loadable on this host ({}); programs that need it will be "
                                + "refused at load", name, e.getMessage());
                return; // later entries depend on earlier ones
            }
        }
    }

    public static synchronized Info info() {
        if (info == null) {
            throw new IllegalStateException("native runtime not loaded");
        }
        return new Info(info.directory(), Map.copyOf(info.libraries()), List.of(NativeBridge.registeredBackends()));
    }

    /**
     * Sizes ExecuTorch's CPU threadpool (the threads XNNPACK and the optimized kernels split an
     * operator over) to {@code requested} threads, where ExecuTorch would take every logical CPU
     * of the host whatever the process may use. Once per process, before the first program loads:
     * XNNPACK keeps the pool in each runtime it builds, so a later call changes nothing.
     *
     * @return the pool's size in effect
     */
    public static synchronized int sizeCpuThreads(int requested) {
        ensureLoaded();
        if (cpuThreads == 0) {
            cpuThreads = NativeBridge.cpuThreads(requested);
        }
        return cpuThreads;
    }

    /** The pool's size is what it is once a program loads (ExecuTorch's own, unless sized first). */
    static void fixCpuThreads() {
        sizeCpuThreads(0);
    }

    /** The libraries loaded after the bridge, in load order: delegates and extra libraries. */
    public static synchronized List<Path> delegateLibraries() {
        return List.copyOf(loadedAfterBridge);
    }

    /** {@value #FIRST_CALL} beside the loaded libraries, when it is there and may run. */
    public static synchronized Optional<Path> firstCallProgram() {
        Path program = info().directory().resolve(FIRST_CALL);
        return Files.isRegularFile(program) && Files.isExecutable(program) ? Optional.of(program) : Optional.empty();
    }

    public static synchronized boolean isLoaded() {
        return info != null;
    }

    private static void loadExtras(List<Path> extras, Map<String, Path> loaded) {
        for (Path extra : extras) {
            String name = extra.getFileName().toString();
            if (!loaded.containsValue(extra.toAbsolutePath())) {
                loadOne(name, extra.toAbsolutePath(), extra.toAbsolutePath().getParent());
                loaded.put(name, extra.toAbsolutePath());
                loadedAfterBridge.add(extra.toAbsolutePath());
            }
        }
    }

    private static void loadOne(String name, Path file, Path dir) {
        if (!Files.isRegularFile(file)) {
            throw new NativeLibraryException("Native library " + name + " is missing from " + dir
                    + "; set etserve.native.library-dir to a directory holding this build's libraries"
                    + " (or leave it unset to use the ones inside the jar).", null);
        }
        try {
            System.load(file.toAbsolutePath().toString());
        } catch (UnsatisfiedLinkError e) {
            throw new NativeLibraryException("Cannot load native library " + file + ": " + e.getMessage()
                    + " (the bridge needs Linux x86-64 with glibc 2.28+ and libstdc++).", e);
        }
    }

    private static List<String> readManifest(Path dir) {
        Path manifest = dir.resolve(MANIFEST);
        try {
            return Files.readAllLines(manifest, StandardCharsets.UTF_8).stream()
                    .map(String::strip).filter(s -> !s.isEmpty()).toList();
        } catch (IOException e) {
            throw new NativeLibraryException("No " + MANIFEST + " in " + dir
                    + ": it is not a directory of etserve native libraries.", e);
        }
    }

    /**
     * The host's CUDA runtime when it has one, so the bridge, the caller-stream library and
     * JavaCPP's CUDA bindings all share one libcudart; the bundled copy serves CPU-only hosts.
     */
    static Optional<Path> systemCudaRuntime() {
        List<String> dirs = new ArrayList<>();
        String ldPath = System.getenv("LD_LIBRARY_PATH");
        if (ldPath != null) {
            dirs.addAll(List.of(ldPath.split(":")));
        }
        dirs.addAll(List.of(System.getProperty("java.library.path", "").split(":")));
        String cudaHome = System.getenv("CUDA_HOME");
        if (cudaHome != null) {
            dirs.add(cudaHome + "/lib64");
        }
        dirs.addAll(List.of("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                "/usr/lib/x86_64-linux-gnu"));
        return dirs.stream().filter(d -> !d.isBlank()).map(d -> Path.of(d, CUDART)).filter(Files::isRegularFile)
                .findFirst();
    }

    /** Extracts the jar's libraries into {@code base/<content hash>}, reusing an earlier extraction. */
    static Path extract(Path base) {
        ClassLoader cl = NativeRuntime.class.getClassLoader();
        byte[] manifest = resource(cl, MANIFEST);
        if (manifest == null) {
            throw new NativeLibraryException("This build carries no native libraries (" + RESOURCE_DIR + "/" + MANIFEST
                    + " is missing from the classpath); build with `mvn package` or set etserve.native.library-dir.",
                    null);
        }
        byte[] delegates = resource(cl, DELEGATES);
        List<String> names = new java.util.ArrayList<>(lines(manifest));
        if (delegates != null) {
            names.addAll(lines(delegates));
        }
        if (cl.getResource(RESOURCE_DIR + "/" + FIRST_CALL) != null) {
            names.add(FIRST_CALL);
        }
        Map<String, byte[]> files = new LinkedHashMap<>();
        MessageDigest digest = sha256();
        digest.update(manifest);
        if (delegates != null) {
            digest.update(delegates);
            files.put(DELEGATES, delegates);
        }
        for (String name : names) {
            if (files.containsKey(name)) {
                continue;
            }
            byte[] bytes = resource(cl, name);
            if (bytes == null) {
                throw new NativeLibraryException("Native library " + name + " listed in " + MANIFEST
                        + " is missing from the jar; rebuild it.", null);
            }
            digest.update(name.getBytes(StandardCharsets.UTF_8));
            digest.update(bytes);
            files.put(name, bytes);
        }
        String name = HexFormat.of().formatHex(digest.digest(), 0, 12);
        try {
            createPrivateDirectories(base);
            if (!onlyOursToChange(base) && !madePrivate(base)) {
                // Someone else could swap a library under us between a check and the load: take a
                // fresh directory of our own instead (a new extraction each start, removed at exit).
                Path own = createPrivateTempDirectory();
                Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                    try {
                        deleteTree(own);  // the loaded libraries stay mapped; their files may go
                    } catch (IOException ignored) {
                        // what is left is the next start's to skip: it extracts afresh
                    }
                }, "etserve-native-cleanup"));
                org.slf4j.LoggerFactory.getLogger(NativeRuntime.class).warn("{} is not a directory only this user may"
                        + " change (another user's, or writable by others); the native libraries go to {} instead."
                        + " Set etserve.native.extract-dir to a private directory.", base, own);
                base = own;
            }
        } catch (IOException e) {
            throw new NativeLibraryException("Cannot extract the native libraries into " + base + ": " + e.getMessage()
                    + "; set etserve.native.extract-dir to a writable directory.", e);
        }
        Path target = base.resolve(name);
        // Reuse an earlier extraction only when every file is byte for byte what this jar
        // carries: the directory name is predictable, and a planted library would run in-process.
        if (Files.isRegularFile(target.resolve(MANIFEST)) && sameContent(target, files)) {
            return target;
        }
        try {
            Path staging = Files.createTempDirectory(base, ".staging-");
            for (Map.Entry<String, byte[]> f : files.entrySet()) {
                Files.write(staging.resolve(f.getKey()), f.getValue());
            }
            if (files.containsKey(FIRST_CALL)) {
                makeExecutable(staging.resolve(FIRST_CALL));
            }
            Files.write(staging.resolve(MANIFEST), manifest);
            try {
                Files.move(staging, target, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException raced) {
                if (!Files.exists(target)) {
                    throw raced;
                }
                if (sameContent(target, files)) {
                    deleteTree(staging); // another JVM extracted the same content first
                } else {
                    return staging; // the existing directory is not ours: load our own copy
                }
            }
            return target;
        } catch (IOException e) {
            throw new NativeLibraryException("Cannot extract the native libraries into " + base + ": " + e.getMessage()
                    + "; set etserve.native.extract-dir to a writable directory.", e);
        }
    }

    private static boolean sameContent(Path dir, Map<String, byte[]> files) {
        try {
            for (Map.Entry<String, byte[]> f : files.entrySet()) {
                Path p = dir.resolve(f.getKey());
                if (!Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)
                        || Files.size(p) != f.getValue().length
                        || !java.util.Arrays.equals(Files.readAllBytes(p), f.getValue())) {
                    return false;
                }
            }
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Whether nobody but this process's user (or root) can change what is under {@code dir}: it
     * is a real directory (no link), this user's, and neither its group nor others may write to
     * it. True where the file system has no POSIX permissions to ask.
     */
    static boolean onlyOursToChange(Path dir) {
        try {
            var attributes = Files.readAttributes(dir, PosixFileAttributes.class,
                    LinkOption.NOFOLLOW_LINKS);
            var permissions = attributes.permissions();
            return attributes.isDirectory()
                    && !permissions.contains(PosixFilePermission.GROUP_WRITE)
                    && !permissions.contains(PosixFilePermission.OTHERS_WRITE)
                    && ownedByThisUser(dir);
        } catch (UnsupportedOperationException e) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Our own directory, only too open (one made by an earlier version under a permissive umask):
     * closed to others now. False where it is another user's, a link, or cannot be changed.
     */
    private static boolean madePrivate(Path dir) {
        try {
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS) || !ownedByThisUser(dir)) {
                return false;
            }
            Files.setPosixFilePermissions(dir, OWNER_ONLY);
            return onlyOursToChange(dir);
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /** By numeric uid where the system tells it (Linux's /proc/self), else by the user's name. */
    private static boolean ownedByThisUser(Path dir) throws IOException {
        try {
            Object mine = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            return mine.equals(Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS));
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return Files.getOwner(dir, LinkOption.NOFOLLOW_LINKS).getName()
                    .equals(System.getProperty("user.name"));
        }
    }

    private static void makeExecutable(Path file) throws IOException {
        try {
            Files.setPosixFilePermissions(file, OWNER_ONLY);
        } catch (UnsupportedOperationException e) {
            if (!file.toFile().setExecutable(true, true)) {
                throw new IOException("cannot make " + file + " executable");
            }
        }
    }

    private static Path createPrivateTempDirectory() throws IOException {
        try {
            return Files.createTempDirectory("etserve-native-", PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        } catch (UnsupportedOperationException e) {
            return Files.createTempDirectory("etserve-native-");
        }
    }

    /** The extraction base, readable by its owner only where the file system supports it. */
    private static void createPrivateDirectories(Path base) throws IOException {
        if (Files.isDirectory(base)) {
            return;
        }
        try {
            Files.createDirectories(base, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        } catch (UnsupportedOperationException e) {
            Files.createDirectories(base);
        }
    }

    private static byte[] resource(ClassLoader cl, String name) {
        try (InputStream in = cl.getResourceAsStream(RESOURCE_DIR + "/" + name)) {
            return in == null ? null : in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted((a, b) -> b.getNameCount() - a.getNameCount()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
