package io.etserve.inference;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The model repository: {@code <root>/<model>/[config.yml]} and {@code <root>/<model>/<version>/model.pte}.
 * Loads everything at startup; a model that fails to load is reported and skipped while the
 * others serve. {@link #load} and {@link #unload} change one model while the rest serve (the
 * repository extension, and the poll mode through {@link #poll}): its new versions load before
 * they replace the old ones, and an old version stops taking requests, lets those it has finish,
 * then frees its instances and program.
 */
public final class ModelRegistry implements AutoCloseable {

    public static final String PROGRAM_FILE = "model.pte";
    private static final Logger log = LoggerFactory.getLogger(ModelRegistry.class);

    private final Path root;
    private final ModelLoader loader;
    private final InferenceObserver observer;
    private final Map<String, TreeMap<Long, ModelVersionState>> models = new ConcurrentHashMap<>();
    /** A model whose directory went away but which could not be unloaded. */
    private static final String GONE = "";
    /** What each model's directory held when it was (re)loaded: the poll mode reloads on change. */
    private final Map<String, String> fingerprints = new ConcurrentHashMap<>();
    private volatile Duration drainTimeout = Duration.ofSeconds(30);
    private volatile UnreleasedDeviceMemory unreleased = new UnreleasedDeviceMemory(UnreleasedDeviceMemory.Policy.REFUSE);
    private final AtomicBoolean loading = new AtomicBoolean();
    private volatile boolean loaded;
    private volatile String repositoryError;

    /** @param observer told of every version that loads and unloads (its metric series live that long) */
    public ModelRegistry(Path root, ModelLoader loader, InferenceObserver observer) {
        this.root = root;
        this.loader = loader;
        this.observer = observer;
    }

    /** Loads every model version in the repository (idempotent). */
    public void loadAll() {
        if (!loading.compareAndSet(false, true)) {
            return;
        }
        try {
            loadRepository();
        } finally {
            loaded = true;
        }
    }

    private void loadRepository() {
        if (!Files.isDirectory(root)) {
            repositoryError = "model repository " + root.toAbsolutePath() + " is not a directory";
            log.error(repositoryError);
            return;
        }
        for (Path modelDir : list(root)) {
            String name = modelDir.getFileName().toString();
            if (!Files.isDirectory(modelDir) || name.startsWith(".")) {
                continue;
            }
            if (!ModelNames.isValidModelName(name)) {
                log.warn("skipping {}: not a valid model name", modelDir);
                continue;
            }
            fingerprints.put(name, fingerprint(modelDir));
            models.put(name, readModel(name, modelDir));
        }
    }

    /** How long an unloaded version may take to finish the requests it has (default 30 s). */
    public void setDrainTimeout(Duration timeout) {
        this.drainTimeout = timeout;
    }

    /** What unloading does with a model whose delegate keeps its device memory (refuse by default). */
    public void setUnreleasedDeviceMemory(UnreleasedDeviceMemory policy) {
        this.unreleased = policy;
    }

    /**
     * Loads, or reloads, {@code name} from its directory: every version is read and loaded
     * before it replaces what served under that name, which is then retired.
     *
     * @throws ModelNotFoundException when the repository has no such model directory
     */
    public synchronized void load(String name) {
        Path dir = ModelNames.isValidModelName(name) ? root.resolve(name) : null;
        if (dir == null || !Files.isDirectory(dir)) {
            throw new ModelNotFoundException("no model directory '" + abbreviate(name) + "' in the repository");
        }
        refuseToRetire(name, "reload");
        String print = fingerprint(dir);
        TreeMap<Long, ModelVersionState> loaded = readModel(name, dir);
        fingerprints.put(name, print);
        retire(models.put(name, loaded));
    }

    /**
     * Unloads {@code name}: new requests get 404 at once, those in flight finish, then each version
     * is freed.
     *
     * @throws ModelNotFoundException when no such model is loaded
     */
    public synchronized void unload(String name) {
        if (!ModelNames.isValidModelName(name) || !models.containsKey(name)) {
            throw new ModelNotFoundException("unknown model '" + abbreviate(name) + "'");
        }
        refuseToRetire(name, "unload");
        TreeMap<Long, ModelVersionState> old = models.remove(name);
        fingerprints.remove(name);
        retire(old);
    }

    /**
     * The poll mode's step: loads model directories that appeared, reloads those whose files
     * changed (names, sizes, modification times), unloads those that went away.
     */
    public synchronized void poll() {
        java.util.Set<String> present = new java.util.HashSet<>();
        for (Path modelDir : Files.isDirectory(root) ? list(root) : List.<Path>of()) {
            String name = modelDir.getFileName().toString();
            if (!Files.isDirectory(modelDir) || name.startsWith(".") || !ModelNames.isValidModelName(name)) {
                continue;
            }
            present.add(name);
            String print = fingerprint(modelDir);
            if (!print.equals(fingerprints.get(name))) {
                log.info("model {} {} on disk: loading it", name, models.containsKey(name) ? "changed" : "appeared");
                try {
                    load(name);
                } catch (RepositoryControl.RefusedException e) {
                    // It keeps serving what it loaded; told once per change on disk.
                    fingerprints.put(name, print);
                    log.warn("{}", e.getMessage());
                }
            }
        }
        for (String name : List.copyOf(models.keySet())) {
            if (!present.contains(name) && !GONE.equals(fingerprints.get(name))) {
                log.info("model {} is gone from the repository: unloading it", name);
                try {
                    unload(name);
                } catch (RepositoryControl.RefusedException e) {
                    fingerprints.put(name, GONE);  // told once; it serves on from memory
                    log.warn("{}", e.getMessage());
                }
            }
        }
    }

    /** Refuses to retire what serves under {@code name} when the policy keeps leaking delegates loaded. */
    private void refuseToRetire(String name, String what) {
        TreeMap<Long, ModelVersionState> current = models.get(name);
        if (current == null) {
            return;
        }
        for (ModelVersionState s : current.values()) {
            if (s instanceof ModelVersionState.Ready ready) {
                var why = unreleased.refusal(abbreviate(name), ready.model().description(),
                        ready.model().instances().placement(), what);
                if (why.isPresent()) {
                    throw new RepositoryControl.RefusedException(why.get());
                }
            }
        }
    }

    private void retire(TreeMap<Long, ModelVersionState> versions) {
        if (versions == null) {
            return;
        }
        for (ModelVersionState s : versions.values()) {
            if (s instanceof ModelVersionState.Ready ready) {
                unreleased.leakNotice(s.name(), s.version(), ready.model().description(),
                        ready.model().instances().placement(), ready.model().instances().capacity())
                        .ifPresent(log::warn);
                try {
                    if (!ready.model().retire(drainTimeout)) {
                        log.warn("model {} version {} still had {} requests after {}: left allocated", s.name(),
                                s.version(), ready.model().inUse(), drainTimeout);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    log.warn("interrupted while model {} version {} drained: left allocated", s.name(), s.version());
                }
            }
            if (s.description().isPresent()) {
                observer.unloaded(s.name(), s.version());
            }
            log.info("model {} version {} unloaded", s.name(), s.version());
        }
    }

    /** Names, sizes and modification times of the files in a model directory, two levels deep. */
    private static String fingerprint(Path modelDir) {
        StringBuilder b = new StringBuilder();
        try (java.util.stream.Stream<Path> files = Files.walk(modelDir, 2)) {
            files.filter(Files::isRegularFile).sorted().forEach(f -> {
                try {
                    b.append(modelDir.relativize(f)).append(':').append(Files.size(f)).append(':')
                            .append(Files.getLastModifiedTime(f).toMillis()).append('\n');
                } catch (IOException e) {
                    b.append(f.getFileName()).append(":?\n");
                }
            });
        } catch (IOException | java.io.UncheckedIOException e) {
            return "unreadable";
        }
        return b.toString();
    }

    private TreeMap<Long, ModelVersionState> readModel(String name, Path modelDir) {
        TreeMap<Long, ModelVersionState> versions = new TreeMap<>();
        ModelConfig config;
        try {
            config = ModelConfig.read(modelDir);
        } catch (ModelConfig.InvalidModelConfigException e) {
            versions.put(0L, new ModelVersionState.Failed(name, "", e.getMessage()));
            log.error("model {} failed: {}", name, e.getMessage());
            return versions;
        }
        java.util.TreeSet<Long> available = new java.util.TreeSet<>();
        for (Path versionDir : list(modelDir)) {
            String version = versionDir.getFileName().toString();
            if (Files.isDirectory(versionDir) && ModelNames.isValidVersion(version)) {
                available.add(Long.parseLong(version));
            }
        }
        java.util.SortedSet<Long> selected = config.versionPolicy().select(available);
        for (Path versionDir : list(modelDir)) {
            String version = versionDir.getFileName().toString();
            if (!Files.isDirectory(versionDir) || !ModelNames.isValidVersion(version)
                    || !selected.contains(Long.parseLong(version))) {
                continue;
            }
            Path file = versionDir.resolve(PROGRAM_FILE);
            ModelVersionState state = Files.isRegularFile(file)
                    ? loader.load(name, version, file, config)
                    : new ModelVersionState.Failed(name, version, "no " + PROGRAM_FILE + " in " + versionDir);
            versions.put(Long.parseLong(version), state);
            if (state.description().isPresent()) {
                observer.loaded(name, version);
            }
            if (state instanceof ModelVersionState.Ready ready) {
                log.info("model {} version {} ready on {}", name, version, ready.model().instances().placement());
            } else if (state instanceof ModelVersionState.Unavailable unavailable) {
                log.warn("model {} version {} unavailable: {}", name, version, unavailable.reason());
            } else if (state instanceof ModelVersionState.Failed failed) {
                log.error("model {} version {} failed: {}", name, version, failed.reason());
            }
        }
        if (versions.isEmpty()) {
            versions.put(0L, new ModelVersionState.Failed(name, "", available.isEmpty()
                    ? "no version directory with a " + PROGRAM_FILE
                    : "version-policy selects none of the versions " + available));
        }
        return versions;
    }

    private static List<Path> list(Path dir) {
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir)) {
            s.forEach(out::add);
        } catch (IOException e) {
            log.error("cannot list {}: {}", dir, e.getMessage());
        }
        out.sort(Comparator.naturalOrder());
        return out;
    }

    /** True once every model's load has concluded (ready, unavailable or failed). */
    public boolean isLoaded() {
        return loaded;
    }

    public Optional<String> repositoryError() {
        return Optional.ofNullable(repositoryError);
    }

    public Collection<String> modelNames() {
        return new TreeMap<>(models).keySet();
    }

    /** Every version of every model. */
    public List<ModelVersionState> states() {
        return new TreeMap<>(models).values().stream().flatMap(v -> v.values().stream()).toList();
    }

    /**
     * The named version, or the highest version when {@code version} is null.
     *
     * @throws ModelNotFoundException for an unknown model or version
     */
    public ModelVersionState resolve(String name, String version) {
        TreeMap<Long, ModelVersionState> versions = ModelNames.isValidModelName(name) ? models.get(name) : null;
        if (versions == null) {
            throw new ModelNotFoundException("unknown model '" + abbreviate(name) + "'");
        }
        if (version == null || version.isEmpty()) {
            return versions.lastEntry().getValue();
        }
        ModelVersionState state = ModelNames.isValidVersion(version) ? versions.get(Long.parseLong(version)) : null;
        if (state == null) {
            throw new ModelNotFoundException("unknown version '" + abbreviate(version) + "' of model '" + name + "'");
        }
        return state;
    }

    /**
     * What the named version declares (metadata), whether or not this node can run it.
     *
     * @throws ModelNotFoundException for an unknown model or version
     * @throws ModelUnavailableException when that version did not load
     */
    public ModelDescription describe(String name, String version) {
        ModelVersionState state = resolve(name, version);
        return state.description().orElseThrow(() -> new ModelUnavailableException("model '" + state.name()
                + "' version " + state.version() + " did not load: " + state.notReadyReason().orElse("")));
    }

    /** Whether {@code name} is a model of the repository (loaded or not). */
    public boolean knows(String name) {
        return name != null && models.containsKey(name);
    }

    /** Versions of a model, ascending (for metadata). */
    public List<String> versions(String name) {
        TreeMap<Long, ModelVersionState> v = models.get(name);
        return v == null ? List.of()
                : v.values().stream().map(ModelVersionState::version).filter(s -> !s.isEmpty()).toList();
    }

    /**
     * A client-supplied name for a message: at most 64 code points, readable text kept (a model
     * named in any script reads back as sent), control and invisible formatting characters
     * (line breaks, bidi overrides, unpaired surrogates) escaped as {@code \\uXXXX} so a name
     * cannot forge log lines or reorder the message around it.
     */
    static String abbreviate(String s) {
        if (s == null) {
            return "";
        }
        StringBuilder out = new StringBuilder();
        int[] cps = s.codePoints().limit(65).toArray();
        for (int i = 0; i < Math.min(64, cps.length); i++) {
            int cp = cps[i];
            int type = Character.getType(cp);
            if (Character.isISOControl(cp) || type == Character.FORMAT || type == Character.SURROGATE
                    || type == Character.UNASSIGNED || type == Character.LINE_SEPARATOR
                    || type == Character.PARAGRAPH_SEPARATOR) {
                out.append(String.format("\\u%04X", cp));
            } else {
                out.appendCodePoint(cp);
            }
        }
        return cps.length > 64 ? out + "..." : out.toString();
    }

    @Override
    public void close() {
        for (ModelVersionState s : states()) {
            if (s instanceof ModelVersionState.Ready ready) {
                ready.model().close();
            }
            if (s.description().isPresent()) {
                observer.unloaded(s.name(), s.version());
            }
        }
        models.clear();
    }
}
