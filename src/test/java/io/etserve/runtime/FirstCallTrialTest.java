package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.TestPaths;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The first-call trial on the real runtime, with the program the build ships. The two faulting
 * files pass ExecuTorch's verification and end a process at method load (XNNPACK) or at the
 * first call (a kernel index past the table): this JVM would die if either reached it.
 */
class FirstCallTrialTest {

    private static final Path CORRUPT = TestPaths.repoRoot().resolve("src/test/resources/corrupt");
    private static final Path DEMO_XNNPACK = TestPaths.demoModels().resolve("demo-xnnpack/1/model.pte");
    private static final Program.Verification CHECKED = Program.Verification.INTERNAL_CONSISTENCY;
    private static final long LIMIT = 256L << 20;

    private final FirstCallTrial cpu = new FirstCallTrial(FirstCallTrial.Mode.CPU, Duration.ofSeconds(60), Set.of());

    @BeforeAll
    static void load() {
        NativeRuntime.ensureLoaded();
    }

    private FirstCallTrial.Outcome tryCpu(String file) {
        return cpu.run(CORRUPT.resolve(file), List.of(), "forward", CHECKED, LIMIT);
    }

    @Test
    void theProgramShipsBesideTheLibrariesAndPassesAHealthyProgram() {
        assertThat(NativeRuntime.firstCallProgram()).isPresent();
        assertThat(cpu.run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT))
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
    void inCpuModeAMethodOnAGpuDelegateIsNotTried() {
        var gpu = Set.of("XnnpackBackend");  // stands in for a GPU delegate: the flag is by name
        FirstCallTrial.Outcome cpuOnly = new FirstCallTrial(FirstCallTrial.Mode.CPU, Duration.ofSeconds(60), gpu)
                .run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT);
        assertThat(cpuOnly).isInstanceOfSatisfying(FirstCallTrial.Outcome.Passed.class,
                passed -> assertThat(passed.how()).contains("runs on XnnpackBackend"));
        assertThat(new FirstCallTrial(FirstCallTrial.Mode.ALL, Duration.ofSeconds(60), gpu)
                .run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT))
                .isEqualTo(new FirstCallTrial.Outcome.Passed("the call returned"));
    }

    @Test
    void aTrialPastItsTimeoutRefusesTheLoad() {
        // No process starts, loads its libraries and a program within a nanosecond.
        FirstCallTrial.Outcome outcome = new FirstCallTrial(FirstCallTrial.Mode.CPU, Duration.ofNanos(1), Set.of())
                .run(DEMO_XNNPACK, List.of(), "forward", CHECKED, LIMIT);
        assertThat(outcome).isEqualTo(new FirstCallTrial.Outcome.TimedOut(Duration.ofNanos(1)));
        assertThat(outcome.refusesLoad()).isTrue();
    }

    @Test
    void offTriesNothing() {
        assertThat(FirstCallTrial.off().run(CORRUPT.resolve("op-index-out-of-range.pte"), List.of(), "forward",
                CHECKED, LIMIT).refusesLoad()).isFalse();
    }
}
