package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.execution.InferenceObserver;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.OpaqueStreamFactory;
import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * Models load several at a time at start-up and at a poll; one at a time when asked, or when
 * models spread over several devices.
 */
class ModelRegistryLoadThreadsTest {

    /** Each model's index row, and the thread that wrote it. */
    private record Indexed(String model, String thread) {}

    /** Records who indexed what; {@code whileIndexing} runs first, on the loading thread. */
    private static final class Recorder implements InferenceObserver {
        final List<Indexed> rows = new CopyOnWriteArrayList<>();
        private final Consumer<String> whileIndexing;

        Recorder(Consumer<String> whileIndexing) {
            this.whileIndexing = whileIndexing;
        }

        @Override
        public void indexed(String model, String version, boolean loadFailed) {
            whileIndexing.accept(model);
            rows.add(new Indexed(model, Thread.currentThread().getName()));
        }

        @Override
        public void pending(String model, String version, int delta) {}

        @Override
        public void success(String model, String version, long inferences, long queueNanos, long inputNanos,
                long inferNanos, long outputNanos) {}

        @Override
        public void failure(String model, String version, FailureReason reason, long requestNanos) {}
    }

    private static ModelRepositoryFixture threeModels() {
        return ModelRepositoryFixture.create("etserve-startup-loads-").copy(TestPaths.demoModels(), "demo-portable", "a")
                .copy(TestPaths.demoModels(), "demo-portable", "b").copy(TestPaths.demoModels(), "demo-xnnpack", "c");
    }

    @Test
    void modelsLoadBesideEachOther() {
        // Each load waits in the observer until another load is there too: one after another, the
        // first would wait alone and the barrier would break.
        CyclicBarrier together = new CyclicBarrier(2);
        Recorder recorder = new Recorder(model -> {
            if (!model.equals("c")) {
                try {
                    together.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
                    throw new AssertionError("model " + model + " loaded alone", e);
                }
            }
        });
        try (ModelRegistry registry = new ModelRegistry(threeModels().root(), CpuModelLoaders.create(), recorder)) {
            registry.setLoadThreads(2);
            registry.loadAll();
            for (String model : List.of("a", "b", "c")) {
                assertThat(registry.resolve(model, null).ready()).as(model).isTrue();
            }
            assertThat(recorder.rows).extracting(Indexed::model).containsExactlyInAnyOrder("a", "b", "c");
            assertThat(recorder.rows).extracting(Indexed::thread).allMatch(t -> t.startsWith("model-load-"));
        }
    }

    @Test
    void oneThreadLoadsInTheRepositorysOrderOnTheCallersThread() {
        Recorder recorder = new Recorder(model -> {});
        try (ModelRegistry registry = new ModelRegistry(threeModels().root(), CpuModelLoaders.create(), recorder)) {
            registry.setLoadThreads(1);
            registry.loadAll();
            assertThat(recorder.rows).containsExactly(new Indexed("a", Thread.currentThread().getName()),
                    new Indexed("b", Thread.currentThread().getName()), new Indexed("c", Thread.currentThread().getName()));
        }
    }

    @Test
    void whatALoadThrowsEndsTheStartUpOnceEveryLoadHasEnded() {
        CountDownLatch aThrew = new CountDownLatch(1);
        Recorder recorder = new Recorder(model -> {
            if (model.equals("a")) {
                aThrew.countDown();
                throw new IllegalStateException("observer of a broke");
            }
            try {
                // b and c end well after a failed: a start-up that did not wait for them would be gone by then
                aThrew.await(30, TimeUnit.SECONDS);
                Thread.sleep(300);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        try (ModelRegistry registry = new ModelRegistry(threeModels().root(), CpuModelLoaders.create(), recorder)) {
            registry.setLoadThreads(3);
            assertThatThrownBy(registry::loadAll).isInstanceOf(IllegalStateException.class)
                    .hasMessage("observer of a broke");
            // the others finished their loads before the start-up was given the failure
            assertThat(recorder.rows).extracting(Indexed::model).containsExactlyInAnyOrder("b", "c");
        }
    }

    @Test
    void aNodeSpreadingModelsOverSeveralDevicesLoadsThemOneAtATime() {
        Map<Integer, StreamPool> two = Map.of(0, new StreamPool(0, 1, 0, new OpaqueStreamFactory(List.of(0, 1)), n -> {}),
                1, new StreamPool(1, 1, 0, new OpaqueStreamFactory(List.of(0, 1)), n -> {}));
        try (StreamPools pools = new StreamPools(two, null, Duration.ofSeconds(1))) {
            assertThat(CpuModelLoaders.create(pools, DevicePlacement.Policy.SPREAD).placesInLoadOrder()).isTrue();
            assertThat(CpuModelLoaders.create(pools, DevicePlacement.Policy.ALL).placesInLoadOrder()).isFalse();
            assertThat(CpuModelLoaders.create().placesInLoadOrder()).isFalse();

            Recorder recorder = new Recorder(model -> {});
            try (ModelRegistry registry = new ModelRegistry(threeModels().root(),
                    CpuModelLoaders.create(pools, DevicePlacement.Policy.SPREAD), recorder)) {
                registry.setLoadThreads(4);
                registry.loadAll();
                assertThat(recorder.rows).extracting(Indexed::model).containsExactly("a", "b", "c");
                assertThat(recorder.rows).extracting(Indexed::thread).containsOnly(Thread.currentThread().getName());
            }
        }
        try (StreamPools one = new StreamPools(Map.of(0, new StreamPool(0, 1, 0,
                new OpaqueStreamFactory(List.of(0)), n -> {})), null, Duration.ofSeconds(1))) {
            assertThat(CpuModelLoaders.create(one, DevicePlacement.Policy.SPREAD).placesInLoadOrder()).isFalse();
        }
    }

    @Test
    void aPollLoadsTheModelsThatChangedBesideEachOther() throws Exception {
        CyclicBarrier together = new CyclicBarrier(2);
        AtomicBoolean armed = new AtomicBoolean();
        Recorder recorder = new Recorder(model -> {
            if (armed.get() && !model.equals("c")) {
                try {
                    together.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
                    throw new AssertionError("model " + model + " reloaded alone", e);
                }
            }
        });
        ModelRepositoryFixture repo = threeModels();
        try (ModelRegistry registry = new ModelRegistry(repo.root(), CpuModelLoaders.create(), recorder)) {
            registry.setLoadThreads(2);
            registry.loadAll();
            registry.poll();  // what the directories hold now
            for (String model : List.of("a", "b")) {
                Files.createDirectories(repo.root().resolve(model + "/2"));
                Files.copy(repo.root().resolve(model + "/1/model.pte"),
                        repo.root().resolve(model + "/2/model.pte"));
            }
            registry.poll();  // seen changing
            recorder.rows.clear();
            armed.set(true);
            registry.poll();  // settled: both load version 2, each on a thread of the poll's
            armed.set(false);
            assertThat(registry.resolve("a", null).version()).isEqualTo("2");
            assertThat(registry.resolve("b", null).version()).isEqualTo("2");
            assertThat(recorder.rows).extracting(Indexed::thread).allMatch(t -> t.startsWith("model-load-"));
        }
    }

    @Test
    void loadThreadsBelowOneAreRefused() {
        try (ModelRegistry registry = new ModelRegistry(threeModels().root(), CpuModelLoaders.create(),
                InferenceObserver.NONE)) {
            assertThatThrownBy(() -> registry.setLoadThreads(0)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("at least 1");
        }
    }
}
