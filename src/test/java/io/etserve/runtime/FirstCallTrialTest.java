package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.TestPaths;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The first-call trial on the real runtime, with the program the build ships. The two faulting
 * files pass ExecuTorch's verification and end a process at method load (XNNPACK, a read past its
 * payload) or at the first call (a kernel index past the table): this JVM would die if either
 * reached it. Whatever the JVM has loaded before (another test's delegate) must not change that.
 */
class FirstCallTrialTest {

    private static final Path CORRUPT = TestPaths.repoRoot().resolve("src/test/resources/corrupt");
    private static final Path DEMO_XNNPACK = TestPaths.demoModels().resolve("demo-xnnpack/1/model.pte");
    private static final Program.Verification CHECKED = Program.Verification.INTERNAL_CONSISTENCY;
    private static final long LIMIT = 256L << 20;

    private final FirstCallTrial cpu = new FirstCallTrial(FirstCallTrial.Mode.CPU, Duration.ofSeconds(60), Set.of());

    @BeforeAll
    static void load() {
        // Another delegate in the process (the trial loads it too) moves what is mapped where:
        // without the trial's fences, the XNNPACK file's stray read then lands in mapped memory.
        NativeRuntime.Options defaults = NativeRuntime.Options.defaults();
        NativeRuntime.load(new NativeRuntime.Options(defaults.libraryDir(), defaults.extractDir(),
                List.of(TestPaths.probeDelegate())));
        assertThat(NativeRuntime.delegateLibraries()).contains(TestPaths.probeDelegate().toAbsolutePath());
    }

    private FirstCallTrial.Outcome tryCpu(String file) {
        return cpu.run(CORRUPT.resolve(file), List.of(), "forward", CHECKED, LIMIT, false);
    }

    @Test
    void theProgramShipsBesideTheLibrariesAndPassesAHealthyProgram() {
        assertThat(NativeRuntime.firstCallProgram()).isPresent();
        assertThat(cpu.run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT, false))
                .isEqualTo(new FirstCallTrial.Outcome.Passed("the call returned"));
    }

    @Test
    void aProgramThatFaultsAtItsFirstCallIsCaughtWithExecuTorchsLastWords() {
        FirstCallTrial.Outcome outcome = tryCpu("op-index-out-of-range.pte");
        assertThat(outcome).isInstanceOfSatisfying(FirstCallTrial.Outcome.Crashed.class, crashed -> {
            assertThat(crashed.signal()).isEqualTo("SIGSEGV");
            assertThat(crashed.log()).contains("Op index 10354689 out of range");
        });
        assertThat(outcome.refusesLoad()).isTrue();
    }

    @Test
    void aDelegatePayloadThatFaultsAtMethodLoadIsCaught() {
        assertThat(tryCpu("xnnpack-payload-byte.pte")).isInstanceOfSatisfying(FirstCallTrial.Outcome.Crashed.class,
                crashed -> assertThat(crashed.signal()).isIn("SIGSEGV", "SIGBUS"));
    }

    @Test
    void whatExecuTorchRefusesCleanlyIsLeftToTheLoadWhichSaysWhy() {
        FirstCallTrial.Outcome outcome = tryCpu("root-offset-into-header.pte");
        assertThat(outcome.refusesLoad()).isFalse();
        assertThat(outcome).isInstanceOfSatisfying(FirstCallTrial.Outcome.Passed.class,
                passed -> assertThat(passed.how()).contains("cannot load ExecuTorch program"));
    }

    @Test
    void aProgramPlanningMoreThanTheLimitIsNotRunEvenInTheTrial() {
        FirstCallTrial.Outcome outcome = tryCpu("plans-3gib-per-instance.pte");
        assertThat(outcome).isInstanceOfSatisfying(FirstCallTrial.Outcome.Passed.class,
                passed -> assertThat(passed.how()).contains("plans 3221225472 bytes, over 268435456"));
    }

    @Test
    void aMethodOnAGpuDelegateIsTriedOnItsDeviceInAllModeOnly() {
        var gpu = Set.of("XnnpackBackend");  // stands in for a GPU delegate: the flag is by name
        FirstCallTrial.Outcome cpuOnly = new FirstCallTrial(FirstCallTrial.Mode.CPU, Duration.ofSeconds(60), gpu)
                .run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT, false);
        assertThat(cpuOnly).isInstanceOfSatisfying(FirstCallTrial.Outcome.Passed.class,
                passed -> assertThat(passed.how()).contains("runs on XnnpackBackend"));
        // All: its instance goes to the device, as a GPU instance of the service's would; this
        // host has none, which is a clean refusal, left to the load.
        FirstCallTrial.Outcome all = new FirstCallTrial(FirstCallTrial.Mode.ALL, Duration.ofSeconds(60), gpu, 0)
                .run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT, false);
        assertThat(all).isInstanceOfSatisfying(FirstCallTrial.Outcome.Passed.class,
                passed -> assertThat(passed.how()).contains("cudaSetDevice(0)"));
        // Without GPU delegates, all runs a program as cpu does.
        assertThat(new FirstCallTrial(FirstCallTrial.Mode.ALL, Duration.ofSeconds(60), Set.of("CudaBackend"), 0)
                .run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT, false))
                .isEqualTo(new FirstCallTrial.Outcome.Passed("the call returned"));
    }

    @Test
    void inCpuModeAModelPlacedOnAGpuIsNotTried() {
        FirstCallTrial.Outcome outcome = cpu.run(CORRUPT.resolve("op-index-out-of-range.pte"), List.of(), "forward",
                CHECKED, LIMIT, true);
        assertThat(outcome).isInstanceOfSatisfying(FirstCallTrial.Outcome.Passed.class,
                passed -> assertThat(passed.how()).contains("placed on a GPU"));
    }

    @Test
    void aTrialPastItsTimeoutIsKilledAndRefusesTheLoad() {
        long started = System.nanoTime();
        FirstCallTrial.Outcome outcome = new FirstCallTrial(FirstCallTrial.Mode.CPU, Duration.ofMillis(200), Set.of())
                .run(List.of("sleep", "30"));
        assertThat(outcome).isEqualTo(new FirstCallTrial.Outcome.TimedOut(Duration.ofMillis(200)));
        assertThat(outcome.refusesLoad()).isTrue();
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(20));
    }

    @Test
    void theSignalThatEndedTheProcessIsNamedAndItsLastWordsKept() {
        assertThat(cpu.run(List.of("sh", "-c", "echo 'E one' >&2; echo 'E two' >&2; kill -ABRT $$")))
                .isEqualTo(new FirstCallTrial.Outcome.Crashed("SIGABRT", "E one\nE two"));
        assertThat(cpu.run(List.of("sh", "-c", "kill -BUS $$"))).isEqualTo(new FirstCallTrial.Outcome.Crashed("SIGBUS", ""));
        // Any other status is no verdict: the load goes on and meets whatever ExecuTorch says.
        assertThat(cpu.run(List.of("sh", "-c", "echo 'no such library' >&2; exit 127")).refusesLoad()).isFalse();
    }

    @Test
    void aProcessKilledFromOutsideIsTriedOnceMoreAndRefusedWhenKilledAgain(@TempDir Path dir) throws Exception {
        Path runs = dir.resolve("runs");
        // killed every time: twice, then a refusal
        assertThat(cpu.run(List.of("sh", "-c", "echo run >> " + runs + "; kill -KILL $$")))
                .isEqualTo(new FirstCallTrial.Outcome.Crashed(FirstCallTrial.KILLED, ""));
        assertThat(Files.readAllLines(runs)).hasSize(2);
        // killed once (as the OOM killer would under loads beside each other), then it runs: no verdict against it
        Path once = dir.resolve("killed-once");
        assertThat(cpu.run(List.of("sh", "-c", "if [ -e " + once + " ]; then exit 0; fi; touch " + once
                + "; kill -KILL $$"))).isInstanceOf(FirstCallTrial.Outcome.Passed.class);
        // a process that faults is not tried again
        Path faults = dir.resolve("faults");
        assertThat(cpu.run(List.of("sh", "-c", "echo run >> " + faults + "; kill -SEGV $$")).refusesLoad()).isTrue();
        assertThat(Files.readAllLines(faults)).hasSize(1);
    }

    @Test
    void theSecondTryOfAKilledProcessWaitsForTheTrialsBesideIt(@TempDir Path dir) throws Exception {
        Path events = dir.resolve("events");
        Path once = dir.resolve("killed-once");
        Thread beside = new Thread(() -> cpu.run(List.of("sh", "-c",
                "echo beside-start >> " + events + "; sleep 3; echo beside-end >> " + events)));
        beside.start();
        while (!Files.exists(events)) {
            Thread.sleep(10);
        }
        FirstCallTrial.Outcome outcome = cpu.run(List.of("sh", "-c", "if [ -e " + once + " ]; then echo retry >> "
                + events + "; exit 0; fi; touch " + once + "; echo first >> " + events + "; kill -KILL $$"));
        beside.join();
        assertThat(outcome).isInstanceOf(FirstCallTrial.Outcome.Passed.class);
        // the first try ran beside the other trial, the second only once that one had ended
        assertThat(Files.readAllLines(events)).containsExactly("beside-start", "first", "beside-end", "retry");
    }

    @Test
    void offTriesNothing() {
        assertThat(FirstCallTrial.off().run(CORRUPT.resolve("op-index-out-of-range.pte"), List.of(), "forward",
                CHECKED, LIMIT, false).refusesLoad()).isFalse();
    }
}
