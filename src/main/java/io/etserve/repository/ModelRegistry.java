package io.etserve.repository;

import io.etserve.execution.InferenceObserver;
import io.etserve.execution.LoadedModel;
import io.etserve.execution.ModelLookup;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.ModelNames;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.ModelUnavailableException;
import io.etserve.inference.UntrustedText;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.modelconfig.VersionPolicy;
import io.etserve.repository.RepositoryFiles.Snapshot;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongPredicate;
import java.util.function.UnaryOperator;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The model repository: {@code <root>/<model>/[config.yml]} and {@code <root>/<model>/<version>/model.pte}.
 * Loads everything at startup, several models at a time ({@link #setLoadThreads}, as a poll
 * loads the models that changed); a model that fails to load is reported and skipped while the
 * others serve. {@link #load} and {@link #unload} change one model while the rest serve (the
 * repository extension), and {@link #poll} follows the directory (the poll mode).
 *
 * <p>A version that fails to load never replaces one that serves: a new version that fails stays
 * beside the versions that serve, FAILED with its reason; a changed version whose new files fail
 * keeps serving what it loaded before. A request without a version goes to the highest version
 * that is ready, and {@code version-policy: {latest: N}} keeps the N highest versions that load
 * (Triton's choice: the newest ready ones), so a failed newer version leaves the one that served
 * serving. New versions load before they replace old ones; an old version stops taking requests,
 * lets those it has finish, then frees its instances and program.
 */
public final class ModelRegistry implements ModelLookup, AutoCloseable {

    public static final String PROGRAM_FILE = "model.pte";
    private static final Logger log = LoggerFactory.getLogger(ModelRegistry.class);

    private final Path root;
    /** Set by {@link #close()}: a poll that comes after (its scheduler stopping) does nothing. */
    private boolean closed;
    private final ModelLoader loader;
    private final InferenceObserver observer;
    private final Map<String, Model> models = new ConcurrentHashMap<>();
    /**
     * Orders a freed version's series removal against the same version loading again: not the
     * registry's monitor, which a load holds for seconds and a freeing thread must not wait on.
     */
    private final Object seriesLock = new Object();
    /** What each model directory held at the previous poll (poll thread only, under the lock). */
    private final Map<String, Snapshot> lastPoll = new HashMap<>();
    private volatile Duration drainTimeout = Duration.ofSeconds(30);
    private volatile UnreleasedDeviceMemory unreleased = new UnreleasedDeviceMemory(UnreleasedDeviceMemory.Policy.REFUSE);
    private final AtomicBoolean loading = new AtomicBoolean();
    private volatile boolean loaded;
    private volatile String repositoryError;
    private volatile int loadThreads = 4;

    /**
     * One model as it stands, replaced whole, never changed in place: each version's entry
     * (version 0 is a row without a version: a config.yml that does not read, no version at all),
     * and what its directory held when they were decided ({@code null} once the directory went
     * but the model could not be unloaded).
     */
    private record Model(NavigableMap<Long, Entry> versions, Snapshot snapshot) {
        Model {
            versions = Collections.unmodifiableNavigableMap(new TreeMap<>(versions));
        }
    }

    /** One version: where it stands, and the files (config.yml's and its directory's) of its last load. */
    private record Entry(ModelVersionState state, String files) {}

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

    private synchronized void loadRepository() {
        if (!Files.isDirectory(root)) {
            repositoryError = "model repository " + root.toAbsolutePath() + " is not a directory";
            log.error(repositoryError);
            return;
        }
        List<Path> modelDirs = new ArrayList<>();
        for (Path modelDir : RepositoryFiles.entries(root)) {
            String name = modelDir.getFileName().toString();
            if (!Files.isDirectory(modelDir) || name.startsWith(".")) {
                continue;
            }
            if (!ModelNames.isValidModelName(name)) {
                log.warn("skipping {}: not a valid model name", modelDir);
                continue;
            }
            modelDirs.add(modelDir);
        }
        runBesideEachOther(modelDirs.stream().<Runnable>map(dir -> () -> loadAtStartup(dir)).toList());
    }

    /**
     * Runs one reconcile per model, {@code load-threads} at a time. A reconcile touches only its
     * own model's entry, the concurrent map and the observer, and the caller holds the monitor
     * meanwhile, so no repository request or poll runs beside them. Models that spread over
     * several devices take them in the order they load: one at a time, in the repository's order.
     */
    private void runBesideEachOther(List<Runnable> reconciles) {
        int threads = loader.placesInLoadOrder() ? 1 : Math.min(loadThreads, reconciles.size());
        if (threads <= 1) {
            reconciles.forEach(Runnable::run);
            return;
        }
        AtomicInteger n = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "model-load-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<?>> loads = new ArrayList<>();
            for (Runnable reconcile : reconciles) {
                loads.add(pool.submit(reconcile));
            }
            Throwable first = null;
            for (Future<?> load : loads) {
                try {
                    awaitUninterruptibly(load);
                } catch (ExecutionException e) {
                    first = first == null ? e.getCause() : first;
                }
            }
            // As when they run one after another, what one threw is the caller's: once every one has ended.
            if (first instanceof RuntimeException e) {
                throw e;
            }
            if (first instanceof Error e) {
                throw e;
            }
        } finally {
            pool.shutdown();
        }
    }

    private void loadAtStartup(Path modelDir) {
        reconcile(modelDir.getFileName().toString(), modelDir, RepositoryFiles.snapshot(modelDir), v -> true, true,
                UnaryOperator.identity());
    }

    /**
     * Waits for a load, through interrupts: a load running native code cannot be
     * stopped halfway, and the registry must not go on while one still installs its model.
     */
    private static void awaitUninterruptibly(Future<?> load) throws ExecutionException {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    load.get();
                    return;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * How many models load at once at start-up and at a poll (default 4, as Triton's
     * {@code --model-load-thread-count}); 1 loads them one after another.
     */
    public void setLoadThreads(int threads) {
        if (threads < 1) {
            throw new IllegalArgumentException("load threads must be at least 1: " + threads);
        }
        this.loadThreads = threads;
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
     * Loads, or reloads, {@code name} from its directory: every version its policy selects is read
     * and loaded again; each that loads replaces what served under its number, each that fails
     * leaves what served serving.
     *
     * @return the load attempts that failed (none when every version loaded)
     * @throws ModelNotFoundException when the repository has no such model directory
     */
    public synchronized List<ModelVersionState> load(String name) {
        return load(name, null);
    }

    /**
     * As {@link #load(String)}, with {@code override} applied to the configuration config.yml
     * gives (a load request's configuration, Triton's {@code config} parameter). It is asked once
     * before anything loads, so an override that does not fit the model's configuration is
     * refused with nothing changed.
     *
     * @param override null for none
     * @throws ModelConfig.InvalidModelConfigException when the override does not fit (or config.yml does not read)
     */
    public synchronized List<ModelVersionState> load(String name, UnaryOperator<ModelConfig> override) {
        Path dir = ModelNames.isValidModelName(name) ? root.resolve(name) : null;
        if (dir == null || !Files.isDirectory(dir)) {
            throw new ModelNotFoundException("no model directory '" + UntrustedText.abbreviate(name) + "' in the repository");
        }
        if (override != null) {
            override.apply(ModelConfig.read(dir));
        }
        return reconcile(name, dir, RepositoryFiles.snapshot(dir), v -> true, true,
                override == null ? UnaryOperator.identity() : override);
    }

    /**
     * Unloads {@code name}: new requests get 404 at once, those in flight finish, then each version
     * is freed.
     *
     * @throws ModelNotFoundException when no such model is loaded
     */
    public synchronized void unload(String name) {
        Model current = ModelNames.isValidModelName(name) ? models.get(name) : null;
        if (current == null) {
            throw new ModelNotFoundException("unknown model '" + UntrustedText.abbreviate(name) + "'");
        }
        refuseToRetire(name, current.versions().values(), "unload");
        models.remove(name);
        lastPoll.remove(name);
        replaced(name, current.versions(), Collections.emptyNavigableMap());
    }

    /**
     * The poll mode's step. A model directory that went away unloads. What changed on disk loads
     * once it has stopped changing: a version directory whose files (names, sizes, modification
     * times, file ids) are the same as one poll ago, under a config.yml that is too; one still
     * being written waits, and what serves serves on meanwhile.
     */
    public synchronized void poll() {
        if (closed) {
            return;
        }
        // A repository that cannot be read now (a volume remounting, too many open files, a
        // network file system's hiccup) is not an empty one: nothing unloads for it.
        List<Path> modelDirs;
        try {
            modelDirs = RepositoryFiles.readEntries(root);
        } catch (IOException e) {
            log.warn("cannot read the model repository {}: this poll changes nothing ({})", root, e.toString());
            return;
        }
        Set<String> present = new HashSet<>();
        List<Runnable> changed = new ArrayList<>();
        for (Path modelDir : modelDirs) {
            String name = modelDir.getFileName().toString();
            if (!isModelDirectory(modelDir)) {
                continue;
            }
            present.add(name);
            Snapshot now;
            try {
                now = RepositoryFiles.readSnapshot(modelDir);
            } catch (IOException e) {
                log.warn("cannot read model directory {}: it stays as it is this poll ({})", modelDir, e.toString());
                continue;
            }
            Snapshot previous = lastPoll.put(name, now);
            Model current = models.get(name);
            if (current != null && now.equals(current.snapshot())) {
                continue;
            }
            if (previous == null || !previous.config().equals(now.config())) {
                continue;  // a model directory that just appeared, or a config.yml being written
            }
            changed.add(() -> {
                try {
                    reconcile(name, modelDir, now, v -> Objects.equals(previous.versions().get(v),
                            now.versions().get(v)), false, UnaryOperator.identity());
                } catch (RepositoryControl.RefusedException e) {
                    // It keeps serving what it loaded; told once per change on disk.
                    models.put(name, new Model(current.versions(), now));
                    log.warn("{}", e.getMessage());
                }
            });
        }
        // The changed models load (and their old versions drain) beside each other, as at start-up.
        runBesideEachOther(changed);
        lastPoll.keySet().retainAll(present);
        for (String name : List.copyOf(models.keySet())) {
            Model current = models.get(name);
            if (!present.contains(name) && current.snapshot() != null) {
                log.info("model {} is gone from the repository: unloading it", name);
                try {
                    unload(name);
                } catch (RepositoryControl.RefusedException e) {
                    models.put(name, new Model(current.versions(), null));  // told once; it serves on from memory
                    log.warn("{}", e.getMessage());
                }
            }
        }
    }

    /**
     * Brings {@code name} in line with {@code snapshot} of its directory. Each version the policy
     * selects whose files changed since its last load ({@code force}: every one) and that has
     * {@code settled} loads; what the new entries no longer hold is retired.
     *
     * @return the load attempts that failed
     * @throws RepositoryControl.RefusedException when a version that would be retired keeps its
     *     device memory and the policy refuses it (checked before anything loads)
     */
    private List<ModelVersionState> reconcile(String name, Path dir, Snapshot snapshot,
            LongPredicate settled, boolean force, UnaryOperator<ModelConfig> override) {
        Model current = models.get(name);
        NavigableMap<Long, Entry> before = current == null ? Collections.emptyNavigableMap() : current.versions();
        // what the next poll compares with: a version not yet settled is seen as not yet decided
        TreeMap<Long, String> decided = new TreeMap<>(snapshot.versions());
        decided.replaceAll((v, files) -> settled.test(v) ? files : "(still changing)");
        Snapshot acted = new Snapshot(snapshot.config(), decided);
        ModelConfig config;
        try {
            config = override.apply(ModelConfig.read(dir));
        } catch (ModelConfig.InvalidModelConfigException e) {
            // what serves serves on; the row without a version says why nothing else loads
            TreeMap<Long, Entry> next = new TreeMap<>();
            before.forEach((v, entry) -> {
                if (v != 0 && entry.state().ready()) {
                    next.put(v, entry);
                }
            });
            ModelVersionState failed = new ModelVersionState.Failed(name, "", e.getMessage());
            next.put(0L, new Entry(failed, snapshot.config()));
            log.error("model {} failed: {}", name, e.getMessage());
            install(name, current, new Model(next, acted));
            return List.of(failed);
        }
        VersionPolicy policy = config.versionPolicy();
        TreeSet<Long> selected = new TreeSet<>(policy.kind() == VersionPolicy.Kind.SPECIFIC
                ? policy.select(new TreeSet<>(snapshot.versions().keySet())) : snapshot.versions().keySet());
        Map<Long, String> tried = new TreeMap<>();
        Set<Long> servingNow = new TreeSet<>();
        before.forEach((v, entry) -> {
            tried.put(v, entry.files());
            if (entry.state().ready()) {
                servingNow.add(v);
            }
        });
        refuseToRetire(name, mayRetire(servingNow, tried, selected, snapshot, settled, force, policy).stream()
                .map(before::get).toList(), "reload");

        TreeMap<Long, Entry> next = new TreeMap<>();
        List<ModelVersionState> failures = new ArrayList<>();
        int serving = 0;
        Iterable<Long> order = policy.kind() == VersionPolicy.Kind.LATEST ? selected.descendingSet() : selected;
        for (long v : order) {
            if (policy.kind() == VersionPolicy.Kind.LATEST && serving == policy.latest()) {
                break;  // the newest N that load serve; older versions are not loaded
            }
            Entry old = before.get(v);
            Entry entry;
            if (!settled.test(v)) {
                if (old == null) {
                    continue;  // still being written: not yet a version
                }
                entry = old;  // changing under what it loaded: that serves until the files hold still
            } else if (old != null && !force && old.files().equals(snapshot.files(v))) {
                entry = old;
            } else {
                ModelVersionState attempt = loadVersion(name, v, dir, config);
                if (attempt.ready() || old == null || !(old.state() instanceof ModelVersionState.Ready served)) {
                    entry = new Entry(attempt, snapshot.files(v));
                } else {
                    // a version that fails to load never replaces one that serves
                    entry = new Entry(served.withFailedReload("its files changed and did not load, it serves what it"
                            + " loaded before: " + attempt.notReadyReason().orElse("")), snapshot.files(v));
                }
                if (!attempt.ready()) {
                    failures.add(attempt);
                }
            }
            next.put(v, entry);
            if (entry.state().ready()) {
                serving++;
            }
        }
        if (next.isEmpty()) {
            List<Long> writing = selected.stream().filter(v -> !settled.test(v)).toList();
            if (current == null && !writing.isEmpty()) {
                return List.of();  // a new model whose versions are still being written: not yet a model
            }
            next.put(0L, new Entry(new ModelVersionState.Failed(name, "", selected.isEmpty()
                    ? (snapshot.versions().isEmpty() ? "no version directory with a " + PROGRAM_FILE
                            : "version-policy selects none of the versions " + snapshot.versions().keySet())
                    : "no version loaded" + (writing.isEmpty() ? "" : "; versions still being written: " + writing)),
                    snapshot.config()));
        }
        if (force && !servingNow.isEmpty() && next.values().stream().noneMatch(e -> e.state().ready())) {
            // A load asked for (not a change seen on disk) after which nothing would serve changes
            // nothing, as Triton's reload: what served serves on, and the caller is told why.
            if (failures.isEmpty()) {
                failures.add(next.containsKey(0L) ? next.get(0L).state()
                        : new ModelVersionState.Failed(name, "", "no version loaded"));
            }
            log.error("model {}: the load left no version ready, versions {} serve on: {}", name, servingNow,
                    failures.stream().map(f -> f.notReadyReason().orElse("")).collect(Collectors.joining("; ")));
            return failures;
        }
        install(name, current, new Model(next, acted));
        for (ModelVersionState failed : failures) {
            if (!(failed instanceof ModelVersionState.Failed)) {
                continue;  // unavailable here: said when it loaded
            }
            String answering = next.descendingMap().values().stream().map(Entry::state).filter(ModelVersionState::ready)
                    .findFirst().map(s -> "; version " + s.version() + " answers for the model").orElse("");
            log.error("model {} version {} failed: {}{}", name, failed.version(), failed.notReadyReason().orElse(""),
                    answering);
        }
        return failures;
    }

    /**
     * The serving versions a reconcile may retire, decided before it loads anything: those it
     * reloads, those gone from disk or from the policy, and under {@code latest} those below a
     * version it loads (which may push them out).
     *
     * @param serving the versions that serve now
     * @param tried each version's files at its last load
     */
    static SortedSet<Long> mayRetire(Set<Long> serving, Map<Long, String> tried,
            SortedSet<Long> selected, Snapshot snapshot, LongPredicate settled,
            boolean force, VersionPolicy policy) {
        TreeSet<Long> toLoad = new TreeSet<>();
        for (long v : selected) {
            if (settled.test(v) && (force || !snapshot.files(v).equals(tried.get(v)))) {
                toLoad.add(v);
            }
        }
        TreeSet<Long> out = new TreeSet<>();
        for (long v : serving) {
            if (!selected.contains(v) || toLoad.contains(v)
                    || policy.kind() == VersionPolicy.Kind.LATEST && toLoad.higher(v) != null) {
                out.add(v);
            }
        }
        return out;
    }

    private ModelVersionState loadVersion(String name, long v, Path modelDir, ModelConfig config) {
        String version = Long.toString(v);
        Path versionDir = modelDir.resolve(version);
        Path file = versionDir.resolve(PROGRAM_FILE);
        ModelVersionState state = Files.isRegularFile(file)
                ? loader.load(name, version, file, config)
                : new ModelVersionState.Failed(name, version, "no " + PROGRAM_FILE + " in " + versionDir);
        if (state instanceof ModelVersionState.Ready ready) {
            log.info("model {} version {} ready on {}", name, version, ready.model().instances().placement());
        } else if (state instanceof ModelVersionState.Unavailable unavailable) {
            log.warn("model {} version {} unavailable: {}", name, version, unavailable.reason());
        }
        return state;
    }

    /**
     * Makes {@code next} what serves under {@code name}, then tells the observer what changed and
     * retires the models {@code next} no longer holds.
     */
    private void install(String name, Model current, Model next) {
        models.put(name, next);
        replaced(name, current == null ? Collections.emptyNavigableMap() : current.versions(), next.versions());
    }

    private void replaced(String name, NavigableMap<Long, Entry> before, NavigableMap<Long, Entry> after) {
        Set<LoadedModel> kept = Collections.newSetFromMap(new IdentityHashMap<>());
        after.forEach((v, entry) -> {
            String version = v == 0 ? "" : Long.toString(v);
            Entry old = before.get(v);
            if (entry.state().description().isPresent() && (old == null || old.state().description().isEmpty())) {
                synchronized (seriesLock) {
                    observer.loaded(name, version);  // after a freed predecessor's removal, never before
                }
            }
            observer.indexed(name, version, entry.state().loadFailed());
            if (entry.state() instanceof ModelVersionState.Ready ready) {
                kept.add(ready.model());
            }
        });
        before.forEach((v, entry) -> {
            String version = v == 0 ? "" : Long.toString(v);
            Entry now = after.get(v);
            // A version gone from the index takes its series with it, also one that never loaded
            // (the 503s it answered have a failure series). One that served keeps them until it
            // is freed: the requests it drains write to them, and a series written after its
            // removal would come back for good.
            boolean seriesGo = now == null || entry.state().description().isPresent() && now.state().description().isEmpty();
            if (entry.state() instanceof ModelVersionState.Ready ready && !kept.contains(ready.model())) {
                if (seriesGo) {
                    ready.model().onFreed(() -> seriesGone(name, v, version));
                }
                retire(ready);
            } else if (seriesGo) {
                observer.unloaded(name, version);
            }
            if (now == null) {
                observer.unindexed(name, version);
            }
        });
    }

    /**
     * Removes a freed version's series, unless the same version has loaded again meanwhile (its
     * series are the new one's now). Runs where the version is freed: the unload, or its last
     * request after the unload stopped waiting for it.
     */
    private void seriesGone(String name, long v, String version) {
        synchronized (seriesLock) {
            Model current = models.get(name);
            Entry again = current == null ? null : current.versions().get(v);
            if (again == null || again.state().description().isEmpty()) {
                observer.unloaded(name, version);
            }
        }
    }

    /** Refuses to retire any of {@code states} when the policy keeps leaking delegates loaded. */
    private void refuseToRetire(String name, Collection<Entry> entries, String what) {
        for (Entry e : entries) {
            if (e.state() instanceof ModelVersionState.Ready ready) {
                var why = unreleased.refusal(UntrustedText.abbreviate(name), ready.model().description(),
                        ready.model().instances().placement(), what);
                if (why.isPresent()) {
                    throw new RepositoryControl.RefusedException(why.get());
                }
            }
        }
    }

    private void retire(ModelVersionState.Ready ready) {
        LoadedModel model = ready.model();
        unreleased.leakNotice(model.name(), model.version(), model.description(), model.instances().placement(),
                model.instances().capacity()).ifPresent(log::warn);
        try {
            if (!model.retire(drainTimeout)) {
                log.warn("model {} version {} still had {} requests after {}: the last of them frees it", model.name(),
                        model.version(), model.inUse(), drainTimeout);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            log.warn("interrupted while model {} version {} drained: left allocated", model.name(), model.version());
        }
        log.info("model {} version {} unloaded", model.name(), model.version());
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

    /**
     * The model directories in the repository now (valid names, in name order), loaded or not:
     * the index lists the others by name, as Triton's does, so a client of the explicit mode can
     * find what it may load.
     */
    public List<String> repositoryModelNames() {
        if (!Files.isDirectory(root)) {
            return List.of();
        }
        List<String> names = new ArrayList<>();
        for (Path modelDir : RepositoryFiles.entries(root)) {
            if (isModelDirectory(modelDir)) {
                names.add(modelDir.getFileName().toString());
            }
        }
        return names;
    }

    /** A directory of the repository that holds a model: not hidden, named as a model may be. */
    private static boolean isModelDirectory(Path modelDir) {
        String name = modelDir.getFileName().toString();
        return Files.isDirectory(modelDir) && !name.startsWith(".") && ModelNames.isValidModelName(name);
    }

    /** Every version of every model, as the repository index lists them. */
    public List<ModelVersionState> states() {
        return new TreeMap<>(models).values().stream()
                .flatMap(m -> m.versions().values().stream().map(Entry::state)).toList();
    }

    /** Why {@code state} does not serve, naming its version (none for a model without one that loaded). */
    public static String notReady(ModelVersionState state) {
        return "model '" + state.name() + "'" + (state.version().isEmpty() ? "" : " version " + state.version())
                + " is not ready: " + state.notReadyReason().orElse("");
    }

    /**
     * The named version; without one, the highest version that is ready (a newer one that failed
     * or cannot run here never answers for the model), or the highest of all when none is, whose
     * reason then answers.
     *
     * @throws ModelNotFoundException for an unknown model or version
     */
    @Override
    public LoadedModel serving(String name, String version) {
        ModelVersionState state = resolve(name, version);
        if (!(state instanceof ModelVersionState.Ready ready)) {
            throw new ModelUnavailableException(notReady(state), null, state.version());
        }
        return ready.model();
    }

    public ModelVersionState resolve(String name, String version) {
        Model model = ModelNames.isValidModelName(name) ? models.get(name) : null;
        if (model == null) {
            throw new ModelNotFoundException("unknown model '" + UntrustedText.abbreviate(name) + "'");
        }
        if (version == null || version.isEmpty()) {
            for (Entry e : model.versions().descendingMap().values()) {
                if (e.state().ready()) {
                    return e.state();
                }
            }
            return model.versions().lastEntry().getValue().state();
        }
        Entry entry = ModelNames.isValidVersion(version) ? model.versions().get(Long.parseLong(version)) : null;
        if (entry == null) {
            throw new ModelNotFoundException("unknown version '" + UntrustedText.abbreviate(version) + "' of model '" + name + "'");
        }
        return entry.state();
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

    /** The models none of whose versions is ready: a request without a version gets 503. */
    public List<String> notServing() {
        return new TreeMap<>(models).entrySet().stream()
                .filter(m -> m.getValue().versions().values().stream().noneMatch(e -> e.state().ready()))
                .map(Map.Entry::getKey).toList();
    }

    /** Versions of a model, ascending (for metadata). */
    public List<String> versions(String name) {
        Model m = models.get(name);
        return m == null ? List.of()
                : m.versions().values().stream().map(e -> e.state().version()).filter(s -> !s.isEmpty()).toList();
    }

    @Override
    public synchronized void close() {
        // Synchronized as poll and the repository API are: one still loading finishes first,
        // and none starts after (closed), so nothing loaded now outlives the registry.
        closed = true;
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
