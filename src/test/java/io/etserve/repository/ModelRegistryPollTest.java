package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.execution.InferenceObserver;
import io.etserve.execution.LoadedModel;
import io.etserve.modelconfig.VersionPolicy;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.LongPredicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The poll mode step by step ({@link ModelRegistry#poll()} called by the test, one call per
 * interval), on the real loader: what loads when, and that a version that fails never replaces
 * one that serves.
 */
class ModelRegistryPollTest {

    static final byte[] PROGRAM = read(TestPaths.demoModels().resolve("demo-xnnpack/1/model.pte"));

    /** What the registry told the metrics, in order. */
    static final class Recording implements InferenceObserver {
        final List<String> events = Collections.synchronizedList(new ArrayList<>());

        @Override
        public void indexed(String model, String version, boolean loadFailed) {
            events.add(model + "/" + version + (loadFailed ? " failed" : " ok"));
        }

        @Override
        public void unindexed(String model, String version) {
            events.add(model + "/" + version + " gone");
        }

        /** The versions whose series were removed, in order (apart from events: its order is asserted). */
        final List<String> unloads = Collections.synchronizedList(new ArrayList<>());

        @Override
        public void unloaded(String model, String version) {
            unloads.add(model + "/" + version);
        }

        @Override
        public void pending(String model, String version, int delta) {}

        @Override
        public void success(String model, String version, long n, long q, long i, long c, long o) {}

        @Override
        public void failure(String model, String version, FailureReason reason, long requestNanos) {}
    }

    final Recording metrics = new Recording();
    ModelRegistry registry;
    ModelRepositoryFixture repo;

    ModelRegistry start(String policy) throws IOException {
        repo = ModelRepositoryFixture.create("etserve-poll-steps-").copy(TestPaths.demoModels(), "demo-xnnpack", "m");
        if (policy != null) {
            Files.writeString(repo.root().resolve("m/config.yml"), "version-policy: " + policy + "\n",
                    StandardOpenOption.APPEND);
        }
        registry = new ModelRegistry(repo.root(), CpuModelLoaders.create(), metrics);
        registry.loadAll();
        registry.poll();  // the first poll only looks
        return registry;
    }

    @AfterEach
    void close() {
        if (registry != null) {
            registry.close();
        }
    }

    List<String> index() {
        return registry.states().stream().map(s -> s.version() + " " + s.status()).toList();
    }

    LoadedModel serving() {
        return ((ModelVersionState.Ready) registry.resolve("m", null)).model();
    }

    @Test
    void aRepositoryThatCannotBeReadIsNotAnEmptyOne() throws Exception {
        // A volume remounting (or a file system's hiccup): the root is not there for a poll or two.
        start(null);
        LoadedModel v1 = serving();
        Path away = repo.root().resolveSibling(repo.root().getFileName() + "-away");
        Files.move(repo.root(), away);
        try {
            registry.poll();
            registry.poll();
            assertThat(index()).containsExactly("1 READY");
            assertThat(serving()).isSameAs(v1);
        } finally {
            Files.move(away, repo.root());
        }
        registry.poll();
        assertThat(serving()).as("nothing changed on disk: nothing reloads").isSameAs(v1);
        assertThat(metrics.events).doesNotContain("m/1 gone");
    }

    @Test
    void aVersionBeingWrittenWaitsUntilItsFilesHoldStillForOneInterval() throws Exception {
        start("{ latest: 1 }");
        LoadedModel v1 = serving();
        Path v2 = Files.createDirectories(repo.root().resolve("m/2"));
        Files.write(v2.resolve("model.pte"), Arrays.copyOf(PROGRAM, 1000));
        registry.poll();
        assertThat(index()).containsExactly("1 READY");
        Files.write(v2.resolve("model.pte"), Arrays.copyOfRange(PROGRAM, 1000, 3000), StandardOpenOption.APPEND);
        registry.poll();
        assertThat(index()).containsExactly("1 READY");
        Files.write(v2.resolve("model.pte"), Arrays.copyOfRange(PROGRAM, 3000, PROGRAM.length), StandardOpenOption.APPEND);
        registry.poll();
        assertThat(index()).as("changed since the last poll").containsExactly("1 READY");
        assertThat(serving()).isSameAs(v1);
        registry.poll();
        assertThat(index()).containsExactly("2 READY");
        assertThat(serving().version()).isEqualTo("2");
        assertThat(metrics.events).containsSubsequence("m/1 ok", "m/2 ok", "m/1 gone").doesNotContain("m/2 failed");
    }

    @Test
    void aHalfFileThatHoldsStillFailsBesideVersionOneIsNotRetriedThenLoadsOnceComplete() throws Exception {
        start("{ latest: 1 }");
        LoadedModel v1 = serving();
        Path v2 = Files.createDirectories(repo.root().resolve("m/2"));
        Files.write(v2.resolve("model.pte"), Arrays.copyOf(PROGRAM, PROGRAM.length / 2));
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly("1 READY", "2 FAILED");
        ModelVersionState failed = registry.resolve("m", "2");
        assertThat(failed.notReadyReason().orElseThrow()).contains("File size is too small");
        assertThat(serving()).isSameAs(v1);
        assertThat(registry.notServing()).isEmpty();
        registry.poll();
        registry.poll();
        assertThat(registry.resolve("m", "2")).as("the same files are not loaded again").isSameAs(failed);

        Files.write(v2.resolve("model.pte"), Arrays.copyOfRange(PROGRAM, PROGRAM.length / 2, PROGRAM.length),
                StandardOpenOption.APPEND);
        registry.poll();
        assertThat(serving()).isSameAs(v1);
        registry.poll();
        assertThat(index()).containsExactly("2 READY");
        assertThat(metrics.events).containsSubsequence("m/2 failed", "m/2 ok", "m/1 gone");
    }

    @Test
    void underEveryVersionAFailedNewestLeavesTheHighestReadyOneAnswering() throws Exception {
        start(null);
        publish("2", PROGRAM);
        publish("3", "not a program".getBytes());
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly("1 READY", "2 READY", "3 FAILED");
        assertThat(serving().version()).isEqualTo("2");
        assertThat(registry.versions("m")).containsExactly("1", "2", "3");
        // taken away, the failed version leaves the index and the metrics
        deleteTree(repo.root().resolve("m/3"));
        registry.poll();
        assertThat(index()).containsExactly("1 READY", "2 READY");
        assertThat(metrics.events).containsSubsequence("m/3 failed", "m/3 gone");
    }

    @Test
    void aFailedVersionThatLeavesTheRepositoryTakesItsSeriesWithIt() throws Exception {
        // The 503s a failed version answered made its failure series: they go when it does.
        start(null);
        Path v2 = Files.createDirectories(repo.root().resolve("m/2"));
        Files.write(v2.resolve("model.pte"), Arrays.copyOf(PROGRAM, PROGRAM.length / 2));
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly("1 READY", "2 FAILED");
        deleteTree(v2);
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly("1 READY");
        assertThat(metrics.unloads).containsExactly("m/2");
    }

    @Test
    void aServedVersionWhoseNewFilesFailKeepsServingWhatItLoadedAndSaysWhy() throws Exception {
        start(null);
        LoadedModel v1 = serving();
        publishInto("1", "not a program".getBytes());
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly("1 READY");
        ModelVersionState state = registry.resolve("m", "1");
        assertThat(serving()).isSameAs(v1);
        assertThat(state.loadFailed()).isTrue();
        assertThat(state.indexReason().orElseThrow()).contains("did not load", "serves what it loaded before");
        assertThat(metrics.events).contains("m/1 failed");

        publishInto("1", PROGRAM);
        registry.poll();
        registry.poll();
        assertThat(serving()).isNotSameAs(v1);
        assertThat(registry.resolve("m", "1").indexReason()).isEmpty();
        assertThat(metrics.events.get(metrics.events.size() - 1)).isEqualTo("m/1 ok");
    }

    @Test
    void aConfigThatDoesNotReadLeavesWhatServesServing() throws Exception {
        start(null);
        LoadedModel v1 = serving();
        Files.writeString(repo.root().resolve("m/config.yml"), "instances: [unclosed\n");
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly(" FAILED", "1 READY");
        assertThat(serving()).isSameAs(v1);
        assertThat(registry.notServing()).isEmpty();

        Files.writeString(repo.root().resolve("m/config.yml"), "instances: 1\n");
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly("1 READY");
        assertThat(serving()).as("every version reloads under a new config").isNotSameAs(v1);
        assertThat(serving().instances().capacity()).isEqualTo(1);
    }

    @Test
    void aLoadAfterWhichNothingWouldServeChangesNothingAndSaysWhy() throws Exception {
        // As Triton's reload: an explicit load that leaves no version ready keeps what served.
        start(null);
        LoadedModel v1 = serving();
        Path config = repo.root().resolve("m/config.yml");
        String original = Files.readString(config);
        Files.writeString(config, original + "version-policy: { specific: [5] }\n");
        assertThat(registry.load("m")).singleElement().satisfies(f -> {
            assertThat(f.ready()).isFalse();
            assertThat(f.notReadyReason()).hasValueSatisfying(r -> assertThat(r).contains("selects none of the versions"));
        });
        assertThat(serving()).isSameAs(v1);
        assertThat(index()).containsExactly("1 READY");

        Files.writeString(config, original);
        Path away = repo.root().resolveSibling("m-1-away");
        Files.move(repo.root().resolve("m/1"), away);
        assertThat(registry.load("m")).singleElement().satisfies(f -> assertThat(f.notReadyReason())
                .hasValueSatisfying(r -> assertThat(r).contains("no version directory")));
        assertThat(serving()).isSameAs(v1);

        Files.move(away, repo.root().resolve("m/1"));
        publish("2", read(TestPaths.demoModels().resolve("demo-portable/1/model.pte")));
        assertThat(registry.load("m")).isEmpty();
        assertThat(registry.resolve("m", null).version()).isEqualTo("2");
    }

    @Test
    void removingTheNewestUnderLatestBringsTheOneBelowBack() throws Exception {
        start("{ latest: 1 }");
        publish("2", PROGRAM);
        registry.poll();
        registry.poll();
        assertThat(index()).containsExactly("2 READY");
        deleteTree(repo.root().resolve("m/2"));
        registry.poll();
        assertThat(index()).containsExactly("1 READY");
    }

    // which serving versions a change may retire: what the unreleased-device-memory policy is asked about

    static RepositoryFiles.Snapshot snapshot(long... versions) {
        TreeMap<Long, String> v = new TreeMap<>();
        for (long n : versions) {
            v.put(n, "files of " + n);
        }
        return new RepositoryFiles.Snapshot("config", v);
    }

    static Map<Long, String> tried(RepositoryFiles.Snapshot s, long... versions) {
        Map<Long, String> out = new TreeMap<>();
        for (long n : versions) {
            out.put(n, s.files(n));
        }
        return out;
    }

    static Set<Long> mayRetire(Set<Long> serving, Map<Long, String> tried, RepositoryFiles.Snapshot now,
            LongPredicate settled, boolean force, VersionPolicy policy) {
        return ModelRegistry.mayRetire(serving, tried, new TreeSet<>(now.versions().keySet()), now, settled, force,
                policy);
    }

    @Test
    void aNewVersionMayRetireTheOnesBelowItOnlyUnderLatest() {
        RepositoryFiles.Snapshot now = snapshot(1, 2);
        Map<Long, String> tried = tried(now, 1);
        assertThat(mayRetire(Set.of(1L), tried, now, v -> true, false, VersionPolicy.latest(1))).containsExactly(1L);
        assertThat(mayRetire(Set.of(1L), tried, now, v -> true, false, VersionPolicy.ALL)).isEmpty();
        assertThat(mayRetire(Set.of(1L), tried, now, v -> v == 1, false, VersionPolicy.latest(1)))
                .as("version 2 still being written").isEmpty();
    }

    @Test
    void aChangedGoneOrForcedVersionMayBeRetired() {
        RepositoryFiles.Snapshot before = snapshot(1, 2);
        Map<Long, String> tried = tried(before, 1, 2);
        assertThat(mayRetire(Set.of(1L, 2L), tried, before, v -> true, false, VersionPolicy.ALL)).isEmpty();
        assertThat(mayRetire(Set.of(1L, 2L), tried, before, v -> true, true, VersionPolicy.ALL)).containsExactly(1L, 2L);
        assertThat(mayRetire(Set.of(1L, 2L), tried, snapshot(1), v -> true, false, VersionPolicy.ALL)).containsExactly(2L);
        TreeMap<Long, String> changed = new TreeMap<>(before.versions());
        changed.put(1L, "new files of 1");
        RepositoryFiles.Snapshot now = new RepositoryFiles.Snapshot("config", changed);
        assertThat(mayRetire(Set.of(1L, 2L), tried, now, v -> true, false, VersionPolicy.ALL)).containsExactly(1L);
    }

    // ---------------------------------------------------------------------------------------------

    /** Writes a version elsewhere in the repository, then renames it into place. */
    void publish(String version, byte[] program) throws IOException {
        Path staging = Files.createDirectories(repo.root().resolve("m/.staging-" + version));
        Files.write(staging.resolve("model.pte"), program);
        Files.move(staging, repo.root().resolve("m/" + version), StandardCopyOption.ATOMIC_MOVE);
    }

    /** Replaces a version's model.pte by a rename (never in place: it is mapped by what serves). */
    void publishInto(String version, byte[] program) throws IOException {
        Path tmp = repo.root().resolve("m/" + version + "/.model.pte.tmp");
        Files.write(tmp, program);
        Files.move(tmp, repo.root().resolve("m/" + version + "/model.pte"), StandardCopyOption.ATOMIC_MOVE,
                StandardCopyOption.REPLACE_EXISTING);
    }

    static void deleteTree(Path dir) throws IOException {
        try (var files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    static byte[] read(Path p) {
        try {
            return Files.readAllBytes(p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
