package io.etserve.runtime;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a program's first call in a process of its own before the service loads it.
 *
 * <p>ExecuTorch's verification checks the file's structure, not what its instructions and
 * delegate payloads do: a program can pass it and still fault at method load or at its first
 * call (a kernel index past the table, a delegate's payload read past its end). In the service's
 * process such a fault ends the JVM and every model with it. {@code etserve-first-call} (built
 * with the bridge, shipped beside it) loads the program with the same libraries, each of its
 * segments between inaccessible pages (so that a stray read faults there whatever the JVM has
 * mapped next to it), and runs the method once on zero-filled inputs; a signal there refuses the
 * load. A fault that depends on the input data stays out of its reach.
 */
public final class FirstCallTrial {

    private static final Logger log = LoggerFactory.getLogger(FirstCallTrial.class);
    /** Exit statuses of {@code etserve-first-call} (native/src/first_call_trial.cpp). */
    private static final int RAN = 0;
    private static final int REFUSED = 10;
    private static final int NOT_TRIED = 11;
    /** Java reports a process that a signal ended as 128 + the signal's number. */
    private static final int SIGNALLED = 128;
    /** What a process killed from outside its own code (by the OOM killer, by someone) ended with. */
    public static final String KILLED = "SIGKILL";
    private static final Map<Integer, String> SIGNALS = Map.of(4, "SIGILL", 6, "SIGABRT", 7, "SIGBUS", 8, "SIGFPE",
            9, KILLED, 11, "SIGSEGV");
    /** The end of the process's stderr kept for a message: ExecuTorch's last errors. */
    private static final int LOG_TAIL = 2048;

    /** Which programs are tried. */
    public enum Mode {
        /** None: a program that faults ends the service. */
        OFF,
        /** Programs whose method runs on no GPU delegate, not placed on a GPU: the trial costs no device memory. */
        CPU,
        /** Every program; one on a GPU delegate makes a CUDA context and holds its weights twice meanwhile. */
        ALL
    }

    /** How the trial ended. */
    public sealed interface Outcome {
        /** The call returned (or no trial ran): nothing stands in the load's way. */
        record Passed(String how) implements Outcome {}

        /** The process died on a signal: loading the program would end the service. */
        record Crashed(String signal, String log) implements Outcome {}

        /** The call did not end in time: the process was killed. */
        record TimedOut(Duration limit) implements Outcome {}

        /** Whether the program must not be loaded. */
        default boolean refusesLoad() {
            return !(this instanceof Passed);
        }
    }

    /** Trials run beside each other (shared), a retry of a killed one alone (exclusive). */
    private final ReadWriteLock beside = new ReentrantReadWriteLock();
    private final Mode mode;
    private final Duration timeout;
    private final Set<String> gpuBackends;
    private final int device;

    /**
     * @param gpuBackends delegates that run on a CUDA device: in {@link Mode#CPU} a method on one
     *     of them is not tried
     * @param device the CUDA device a method on one of them is tried on in {@link Mode#ALL}
     */
    public FirstCallTrial(Mode mode, Duration timeout, Set<String> gpuBackends, int device) {
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("the first-call trial's timeout must be positive");
        }
        this.mode = mode;
        this.timeout = timeout;
        this.gpuBackends = Set.copyOf(gpuBackends);
        this.device = device;
    }

    public FirstCallTrial(Mode mode, Duration timeout, Set<String> gpuBackends) {
        this(mode, timeout, gpuBackends, 0);
    }

    public static FirstCallTrial off() {
        return new FirstCallTrial(Mode.OFF, Duration.ofMinutes(1), Set.of());
    }

    /**
     * Tries {@code method} of {@code program} in a separate process.
     *
     * @param maxPlannedBytes a method planning more working memory is not tried (the load refuses it)
     * @param placedOnGpu the model's configuration places it on a GPU: in {@link Mode#CPU} not tried
     */
    public Outcome run(Path program, List<Path> dataFiles, String method, Program.Verification verification,
            long maxPlannedBytes, boolean placedOnGpu) {
        if (mode == Mode.OFF) {
            return new Outcome.Passed("not tried (etserve.repository.first-call-trial=off)");
        }
        if (mode == Mode.CPU && placedOnGpu) {
            return new Outcome.Passed("not tried (placed on a GPU; etserve.repository.first-call-trial=all tries it)");
        }
        Optional<Path> executable = NativeRuntime.firstCallProgram();
        if (executable.isEmpty()) {
            log.warn("{} has no etserve-first-call (a library directory of an older build): {} loads untried",
                    NativeRuntime.info().directory(), program.getFileName());
            return new Outcome.Passed("not tried (no etserve-first-call beside the native libraries)");
        }
        List<String> command = new ArrayList<>(List.of(executable.get().toString(),
                "--program", program.toAbsolutePath().toString(), "--method", method,
                "--verification", Integer.toString(verification.ordinal()),
                // The same pool as in the service: XNNPACK splits its work by it.
                "--cpu-threads", Integer.toString(NativeRuntime.sizeCpuThreads(0)),
                "--max-planned-bytes", Long.toString(maxPlannedBytes)));
        for (Path data : dataFiles) {
            command.add("--data");
            command.add(data.toAbsolutePath().toString());
        }
        for (Path library : NativeRuntime.delegateLibraries()) {
            command.add("--library");
            command.add(library.toString());
        }
        for (String backend : gpuBackends) {
            command.add("--gpu-backend");
            command.add(backend);
        }
        if (mode == Mode.ALL) {
            // A GPU method's instance needs its device: its planned device memory lives there.
            command.add("--device");
            command.add(Integer.toString(device));
        }
        return run(command);
    }

    /**
     * Runs {@code command} as the trial's process and reads its end (the trial's program; tests:
     * others). A process killed from outside (SIGKILL: the kernel's OOM killer, which takes the
     * trial's process first, with models loading beside each other) is tried once more with no
     * other trial running; killed again, it refuses the load.
     */
    Outcome run(List<String> command) {
        Outcome outcome = under(beside.readLock(), command);
        if (outcome instanceof Outcome.Crashed c && c.signal().equals(KILLED)) {
            log.warn("the first-call trial of {} was killed (SIGKILL, most likely for memory): trying it again with"
                    + " no other trial beside it", command.get(2));
            outcome = under(beside.writeLock(), command);
        }
        return outcome;
    }

    private Outcome under(Lock lock, List<String> command) {
        lock.lock();
        try {
            return runOnce(command);
        } finally {
            lock.unlock();
        }
    }

    private Outcome runOnce(List<String> command) {
        Path stderr = null;
        Process process = null;
        long started = System.nanoTime();
        try {
            stderr = Files.createTempFile("etserve-first-call-", ".log");
            process = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(stderr.toFile()).start();
            if (!process.waitFor(timeout.toNanos(), TimeUnit.NANOSECONDS)) {
                process.destroyForcibly().waitFor();
                return new Outcome.TimedOut(timeout);
            }
            int status = process.exitValue();
            String tail = tail(stderr);
            log.debug("first call of {} in a separate process: status {} after {} ms", command.get(2), status,
                    (System.nanoTime() - started) / 1_000_000);
            if (status > SIGNALLED) {
                int signal = status - SIGNALLED;
                return new Outcome.Crashed(SIGNALS.getOrDefault(signal, "signal " + signal), tail);
            }
            return switch (status) {
                case RAN -> new Outcome.Passed("the call returned");
                // ExecuTorch's own refusal: the service's load meets it again and says why.
                case REFUSED, NOT_TRIED -> new Outcome.Passed("not tried: " + lastLine(tail));
                default -> {
                    log.warn("etserve-first-call ended with status {} ({}); {} loads untried", status, lastLine(tail),
                            command.get(2));
                    yield new Outcome.Passed("not tried: status " + status);
                }
            };
        } catch (IOException e) {
            log.warn("cannot run etserve-first-call ({}); {} loads untried", e.getMessage(), command.get(2));
            return new Outcome.Passed("not tried: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while trying the first call of " + command.get(2), e);
        } finally {
            if (process != null && process.isAlive()) {
                process.destroyForcibly();
            }
            if (stderr != null) {
                try {
                    Files.deleteIfExists(stderr);
                } catch (IOException ignored) {
                    // a temporary file: the system's cleaning takes it
                }
            }
        }
    }

    /** The end of what the process wrote, from a line's start. */
    private static String tail(Path file) throws IOException {
        try (RandomAccessFile in = new RandomAccessFile(file.toFile(), "r")) {
            long length = in.length();
            long from = Math.max(0, length - LOG_TAIL);
            byte[] bytes = new byte[(int) (length - from)];
            in.seek(from);
            in.readFully(bytes);
            String text = new String(bytes, StandardCharsets.UTF_8);
            int newline = text.indexOf('\n');
            return (from > 0 && newline >= 0 ? text.substring(newline + 1) : text).strip();
        }
    }

    private static String lastLine(String text) {
        int newline = text.lastIndexOf('\n');
        return newline < 0 ? text : text.substring(newline + 1);
    }
}
