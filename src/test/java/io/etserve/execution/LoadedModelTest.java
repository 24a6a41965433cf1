package io.etserve.execution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.inference.ModelDescription;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.support.TestPaths;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Unloading a version: its requests finish first, and it is freed once, whoever ends last. */
class LoadedModelTest {

    private static LoadedModel model(ProgramInstance instance, Program program) {
        return new LoadedModel(new ModelDescription("m", "1", instance.signature(), List.of(), List.of()), program,
                new CpuInstancePool(List.of(instance)), 1 << 20, null, ModelConfig.defaults());
    }

    private static Program demo() {
        return Program.load(TestPaths.demoModels().resolve("demo-portable/1/model.pte"),
                Program.Verification.INTERNAL_CONSISTENCY);
    }

    @Test
    void aVersionStillInUseWhenTheUnloadStopsWaitingIsFreedByItsLastRequest() throws Exception {
        Program program = demo();
        ProgramInstance instance = program.newInstance("forward");
        LoadedModel model = model(instance, program);
        java.util.concurrent.atomic.AtomicInteger freedHook = new java.util.concurrent.atomic.AtomicInteger();
        model.onFreed(freedHook::incrementAndGet);
        assertThat(model.tryUse()).isTrue();
        assertThat(model.tryUse()).isTrue();

        assertThat(model.retire(Duration.ofMillis(50))).as("two requests still run").isFalse();
        assertThat(model.tryUse()).as("no new request once it goes").isFalse();
        assertThat(instance.stats()).as("not freed under its requests").isNotNull();

        model.release();
        assertThat(instance.stats()).as("one request left").isNotNull();
        assertThat(freedHook).hasValue(0);
        model.release();
        long until = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (freedHook.get() == 0 && System.nanoTime() < until) {
            Thread.sleep(5);  // freed on a thread of its own, not the last request's
        }
        assertThatThrownBy(instance::stats).isInstanceOf(ProgramInstance.InstanceClosedException.class);
        assertThat(freedHook).as("told when freed, after the last request").hasValue(1);
        model.close();  // once only: a second close frees nothing twice
        assertThat(freedHook).hasValue(1);
    }

    @Test
    void aVersionThatDrainsInTimeIsFreedByTheUnload() throws Exception {
        Program program = demo();
        ProgramInstance instance = program.newInstance("forward");
        LoadedModel model = model(instance, program);
        assertThat(model.tryUse()).isTrue();
        Thread releaser = new Thread(() -> {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            model.release();
        });
        releaser.start();
        assertThat(model.retire(Duration.ofSeconds(10))).isTrue();
        assertThatThrownBy(instance::stats).isInstanceOf(ProgramInstance.InstanceClosedException.class);
        releaser.join();
    }
}
