package io.etserve.config;

import io.etserve.cuda.CudaEarlyStart;
import io.etserve.cuda.DeviceSchedule;
import io.etserve.cuda.QueuePolicy;
import io.etserve.repository.DevicePlacement;
import io.etserve.repository.PrivateCopies;
import io.etserve.repository.RepositoryControl;
import io.etserve.repository.UnreleasedDeviceMemory;
import io.etserve.runtime.FirstCallTrial;
import io.etserve.runtime.Program;
import io.etserve.runtime.StreamSelection;
import io.etserve.security.RestrictedApis;
import java.nio.file.Path;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.boot.context.properties.bind.Name;
import org.springframework.boot.convert.DurationUnit;
import org.springframework.util.unit.DataSize;

/**
 * Everything the service reads from {@code etserve.*} (defaults in the top-level
 * application.yml, documented in docs/configuration.md).
 */
@ConfigurationProperties(EtServeProperties.PREFIX)
public record EtServeProperties(
        @DefaultValue("models") Path modelRepository,
        @Name("native") @DefaultValue Native nativeRuntime,
        @DefaultValue Cuda cuda,
        @DefaultValue Inference inference,
        @DefaultValue Health health,
        @DefaultValue Grpc grpc,
        @DefaultValue Repository repository,
        @DefaultValue Api api,
        @DefaultValue Http http,
        @DefaultValue Startup startup,
        @DefaultValue SharedMemory sharedMemory) {

    /** Where these properties live. */
    public static final String PREFIX = "etserve";

    /**
     * @param libraryDir a directory holding the bridge and its libraries; empty = use the jar's
     * @param extractDir where the jar's libraries are extracted
     * @param extraLibraries more delegate libraries (.so) to load; they register by name
     * @param verification ExecuTorch's check of each program before trusting it
     * @param earlyLoad load the libraries on their own thread while the context is built (read
     *     by {@link NativeEarlyLoad} before binding)
     * @param cpuThreads threads of ExecuTorch's CPU threadpool, over which XNNPACK and the
     *     optimized kernels split an operator's work; 0 = the CPUs this process may use (its
     *     affinity and a container's CPU limit, as the JVM counts them), where ExecuTorch alone
     *     would take every logical CPU of the host
     */
    public record Native(
            Path libraryDir,
            Path extractDir,
            @DefaultValue List<Path> extraLibraries,
            @DefaultValue("internal-consistency") Program.Verification verification,
            @DefaultValue("true") boolean earlyLoad,
            @DefaultValue("0") int cpuThreads) {

        public Native {
            if (cpuThreads < 0) {
                throw new IllegalArgumentException("etserve.native.cpu-threads must be 0 (the CPUs this process may"
                        + " use) or a number of threads, got " + cpuThreads);
            }
        }

        /** The threadpool's size to ask for: {@link #cpuThreads}, or the CPUs this process may use. */
        public int cpuThreadsOrAvailable() {
            return cpuThreads > 0 ? cpuThreads : Runtime.getRuntime().availableProcessors();
        }
    }

    /**
     * @param generatedContext use the bean definitions generated when the jar was built (Spring
     *     AOT mode: a start from the jar does unless {@code -Dspring.aot.enabled=false}); {@code
     *     false} builds the context from the settings at startup (read by {@link AotFixedSettings}
     *     before binding, which also does so when the settings differ from the build's)
     * @param earlyBind bind these properties once on a thread of their own as soon as the
     *     configuration is read, so the context's binding finds the caches warm (read by
     *     {@link PropertiesEarlyBind} before binding)
     */
    public record Startup(@DefaultValue("true") boolean generatedContext, @DefaultValue("true") boolean earlyBind) {}

    /** {@code etserve.cuda.enabled}: {@code auto}, {@code true} or {@code false}. */
    public enum CudaMode {
        /** CUDA when a driver and a device are present, CPU-only otherwise. */
        AUTO,
        /** Refuse to start without CUDA. */
        TRUE,
        /** CPU-only, whatever the host has. */
        FALSE
    }

    /**
     * @param enabled {@code auto} (use CUDA when a driver and device are present), {@code true}
     *     (fail startup without them) or {@code false}
     * @param devices device ordinals to serve on; empty = every visible device
     * @param streamsPerDevice CUDA streams per device, shared by every GPU model placed there: the
     *     device's concurrent GPU calls
     * @param priority stream priority (0 = default; lower numbers run first)
     * @param drainTimeout how long shutdown waits for streams still leased before it destroys them
     * @param placement where models without {@code devices} in their config.yml go: {@code spread}
     *     (whole models on devices in turn) or {@code all} (every model on every device)
     * @param defaultInstances Modules per device of a GPU model unless its config.yml sets
     *     {@code instances}: each one holds its delegates' device memory (weights, engines)
     * @param gpuBackends delegate ids that run on a CUDA device: a program that uses none of them
     *     runs on the CPU (no stream, no guard) unless its config.yml says {@code placement: gpu}
     * @param completionWait how a GPU call waits for its stream: {@code adaptive} (sleep for the
     *     learned GPU time, then poll an event), {@code spin} or {@code blocking}
     * @param sleepSlice the adaptive wait's longest single sleep ({@code 0}: one sleep for the whole
     *     expected GPU time). A core that sleeps long may be parked (a hypervisor, a deep idle
     *     state) and comes back with cold caches, which the work after the wait pays for; slices
     *     short enough that the host keeps the core trade CPU for that latency; a bare number is
     *     microseconds
     * @param completionTimeout how long the adaptive wait waits for a call's GPU work; past it the
     *     call fails and its device is taken as hung (faulted, as after a sticky CUDA error: its
     *     models answer 503 and liveness fails once no device serves), since nothing can stop
     *     the work and its stream stays busy. {@code 0}: wait forever
     * @param earlyStart start CUDA (driver, primary contexts), then probe TensorRT, on their own
     *     thread while the context is built (read by {@link CudaEarlyStart} before binding)
     * @param deviceSchedule how a thread waits inside a synchronous CUDA call a delegate makes:
     *     {@code auto} (CUDA's: spin), {@code spin}, {@code yield} or {@code blocking-sync}
     */
    public record Cuda(
            @DefaultValue("auto") CudaMode enabled,
            @DefaultValue List<Integer> devices,
            @DefaultValue("4") int streamsPerDevice,
            @DefaultValue("0") int priority,
            @DefaultValue("30s") Duration drainTimeout,
            @DefaultValue("spread") DevicePlacement.Policy placement,
            @DefaultValue("1") int defaultInstances,
            @DefaultValue({"TensorRTBackend", "CudaBackend"}) List<String> gpuBackends,
            @DefaultValue("adaptive") StreamSelection.CompletionWait completionWait,
            @DefaultValue("0") @DurationUnit(ChronoUnit.MICROS) Duration sleepSlice,
            @DefaultValue("60s") Duration completionTimeout,
            @DefaultValue("true") boolean earlyStart,
            @DefaultValue("auto") DeviceSchedule deviceSchedule) {

        public Cuda {
            atLeastOne("etserve.cuda.streams-per-device", streamsPerDevice);
            atLeastOne("etserve.cuda.default-instances", defaultInstances);
            try {
                StreamSelection.sleepSliceMicros(sleepSlice);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("etserve.cuda.sleep-slice: " + e.getMessage());
            }
            try {
                StreamSelection.waitTimeoutMillis(completionTimeout);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("etserve.cuda.completion-timeout: " + e.getMessage());
            }
        }
    }

    /**
     * @param defaultInstances Modules per CPU model when its config.yml sets none
     * @param queueTimeout longest wait for a free instance before answering 503
     * @param maxRequestSize largest request body accepted (413 above)
     * @param maxElementsPerTensor largest element count of one input tensor (400 above)
     * @param maxInputs most input tensors in one request
     * @param strictReadiness when true, one failed model keeps the server not-ready
     * @param maxInflightRequestBytes request bodies held at once, all models together: bodies are
     *     decoded before a model admits them, so this bounds their memory (503 above); a body
     *     counts what has arrived, not what it declares
     * @param maxPlannedMemory planned working memory one instance of a model may allocate (a
     *     model's config.yml {@code max-planned-memory} overrides it); refused at load above
     * @param maxPlannedMemoryPerModel planned working memory of all instances of one model version
     * @param bodyTimeout longest time a request body may take to arrive (408 after it); bodies
     *     are read without holding a request thread, so this bounds connections, not threads
     * @param tensorBufferPool direct memory kept for reuse by tensor data between requests
     *     (binary request sections, JSON-decoded inputs, outputs); more is allocated when needed
     * @param queuePolicy the order of every line a request waits in (an instance, a batch)
     */
    public record Inference(
            @DefaultValue("2") int defaultInstances,
            @DefaultValue("2s") Duration queueTimeout,
            @DefaultValue("64MB") DataSize maxRequestSize,
            @DefaultValue("16777216") long maxElementsPerTensor,
            @DefaultValue("64") int maxInputs,
            @DefaultValue("false") boolean strictReadiness,
            @DefaultValue("512MB") DataSize maxInflightRequestBytes,
            @DefaultValue("60s") Duration bodyTimeout,
            @DefaultValue("2GB") DataSize maxPlannedMemory,
            @DefaultValue("8GB") DataSize maxPlannedMemoryPerModel,
            @DefaultValue("256MB") DataSize tensorBufferPool,
            @DefaultValue QueuePolicySettings queuePolicy) {

        public Inference {
            atLeastOne("etserve.inference.default-instances", defaultInstances);
            atLeastOne("etserve.inference.max-inputs", maxInputs);
            atLeastOne("etserve.inference.max-elements-per-tensor", maxElementsPerTensor);
            atLeastOne("etserve.inference.max-request-size", maxRequestSize.toBytes());
            atLeastOne("etserve.inference.max-inflight-request-bytes", maxInflightRequestBytes.toBytes());
            if (queueTimeout.isNegative() || bodyTimeout.isNegative() || bodyTimeout.isZero()) {
                throw new IllegalArgumentException("etserve.inference.queue-timeout must not be negative and "
                        + "etserve.inference.body-timeout must be positive");
            }
        }
    }

    /**
     * {@code etserve.inference.queue-policy} (see {@link QueuePolicy}).
     *
     * @param order {@code fifo}, or {@code adaptive-lifo}: arrival order, newest first while the
     *     line is congested
     * @param giveUpWindow how long a line stays newest-first after a waiting caller gave up on it
     *     (went away, or passed its deadline)
     * @param maxFifoWait the oldest waiter's wait past which a line is newest-first too; 0: never
     */
    public record QueuePolicySettings(
            @DefaultValue("adaptive-lifo") QueuePolicy.Order order,
            @DefaultValue("1s") Duration giveUpWindow,
            @DefaultValue("0s") Duration maxFifoWait) {

        public QueuePolicySettings {
            if (giveUpWindow.isNegative() || maxFifoWait.isNegative()) {
                throw new IllegalArgumentException("etserve.inference.queue-policy.give-up-window and "
                        + "max-fifo-wait must not be negative");
            }
        }

        public QueuePolicy policy() {
            return new QueuePolicy(order, giveUpWindow, maxFifoWait);
        }
    }

    /** Binding fails with the property's name when a count or size is not positive. */
    private static void atLeastOne(String property, long value) {
        if (value < 1) {
            throw new IllegalArgumentException(property + " must be at least 1, not " + value);
        }
    }

    /**
     * The Open Inference Protocol over gRPC, on its own port.
     *
     * @param enabled serve it
     * @param port 8001 as Triton's (0: any free port)
     * @param address the interface to bind; empty = all
     * @param maxMessageSize largest request message (RESOURCE_EXHAUSTED above); empty = etserve.inference.max-request-size
     * @param threads calls run at once on workers (each runs its forward call on its thread, as a REST
     *     request does)
     * @param inlineBelow an inference whose model has an idle CPU instance, static input shapes, no
     *     batching and forward calls under this lately, with no other call of its connection in
     *     flight, runs on the event loop that read it, not on a worker (0: never)
     * @param inlineAloneBelow an inference whose connection is the only one of this port on its event loop,
     *     to a model (CPU or GPU) with no batching, static input shapes and forward calls under this
     *     lately, runs on that loop when an instance is free at once (0: never, the default)
     * @param earlyInit initialize Netty's classes on their own thread while the context is built
     *     (read by {@link io.etserve.grpc.NettyEarlyInit} before binding)
     * @param eventLoops Netty's event-loop threads for the port; unset: {@link #eventLoopsFor}
     */
    public record Grpc(
            @DefaultValue("true") boolean enabled,
            @DefaultValue("8001") int port,
            @DefaultValue("") String address,
            DataSize maxMessageSize,
            @DefaultValue("64") int threads,
            @DefaultValue("250us") Duration inlineBelow,
            @DefaultValue("0s") Duration inlineAloneBelow,
            @DefaultValue("true") boolean earlyInit,
            Integer eventLoops) {

        public Grpc {
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("etserve.grpc.port must be 0..65535, not " + port);
            }
            atLeastOne("etserve.grpc.threads", threads);
            if (eventLoops != null) {
                atLeastOne("etserve.grpc.event-loops", eventLoops);
            }
            if (inlineBelow.isNegative()) {
                throw new IllegalArgumentException("etserve.grpc.inline-below must not be negative");
            }
            if (inlineAloneBelow.isNegative()) {
                throw new IllegalArgumentException("etserve.grpc.inline-alone-below must not be negative");
            }
        }

        /**
         * Event-loop threads for {@code cores} when {@code event-loops} does not say. While calls
         * may run on the loops ({@code inline-below} or {@code inline-alone-below} set): one per
         * core, REST's rule for its selectors ({@link Http#selectorsFor}): no more loops running
         * calls than cores to run them, no fewer than the cores the service may use
         * (bench/results/2026-12-06-selectors-per-core.md); two per core took turns on them, for
         * quick calls and GPU calls alike (bench/results/2026-12-06-h200-grpc-loops-per-core.md).
         * Otherwise Netty's own two per core: without calls on the loops they only move bytes.
         */
        public int eventLoopsFor(int cores) {
            if (eventLoops != null) {
                return eventLoops;
            }
            int perCore = Http.selectorsFor(cores);
            return inlineBelow.isZero() && inlineAloneBelow.isZero() ? 2 * perCore : perCore;
        }
    }

    /**
     * Model repository control (Triton's repository extension).
     *
     * @param mode {@code startup}: load everything once; {@code poll}: also load, reload and unload
     *     what changes on disk every {@code pollInterval}; {@code explicit}: load and unload through
     *     {@code POST /v2/repository/models/{m}/load|unload}
     * @param pollInterval how often the poll mode looks
     * @param drainTimeout how long an unloaded version may take to finish its requests before it
     *     is freed (after that the unload goes on, logged, and its last request frees it)
     * @param unreleasedDeviceMemory unloading or reloading a model whose delegate keeps its device
     *     memory until the process exits (ExecuTorch's CudaBackend): refuse, or leak and log it
     * @param privateCopies serve each version from a copy made at load, so nothing written to
     *     the repository can reach a served program (see {@link PrivateCopies})
     * @param privateCopyDir where those copies live (empty: {@code ${java.io.tmpdir}/etserve-programs})
     * @param requireDigest refuse a program or data file that declares no sha256 (see
     *     {@link io.etserve.repository.ProgramIntegrity})
     * @param firstCallTrial which programs run their first call in a process of their own before
     *     they load, so that one that faults is refused instead of ending the service
     *     ({@link FirstCallTrial}): {@code cpu} (those on no GPU delegate, not placed on a GPU), {@code all}, {@code off}
     * @param firstCallTrialTimeout how long that call may take before the program is refused
     */
    public record Repository(
            @DefaultValue("startup") RepositoryControl.Mode mode,
            @DefaultValue("15s") Duration pollInterval,
            @DefaultValue("30s") Duration drainTimeout,
            @DefaultValue("refuse") UnreleasedDeviceMemory.Policy unreleasedDeviceMemory,
            @DefaultValue("true") boolean privateCopies,
            @DefaultValue("") String privateCopyDir,
            @DefaultValue("false") boolean requireDigest,
            @DefaultValue("cpu") FirstCallTrial.Mode firstCallTrial,
            @DefaultValue("60s") Duration firstCallTrialTimeout,
            @DefaultValue("4") int loadThreads) {

        public Repository {
            if (pollInterval.isNegative() || pollInterval.isZero()) {
                throw new IllegalArgumentException("etserve.repository.poll-interval must be positive");
            }
            if (firstCallTrialTimeout.isNegative() || firstCallTrialTimeout.isZero()) {
                throw new IllegalArgumentException("etserve.repository.first-call-trial-timeout must be positive");
            }
            if (loadThreads < 1) {
                throw new IllegalArgumentException("etserve.repository.load-threads must be at least 1: " + loadThreads);
            }
        }

        /** Where versions are served from. */
        public PrivateCopies copies() {
            if (!privateCopies) {
                return PrivateCopies.none();
            }
            return PrivateCopies.under(privateCopyDir.isBlank()
                    ? Path.of(System.getProperty("java.io.tmpdir"), "etserve-programs") : Path.of(privateCopyDir));
        }
    }

    /**
     * @param restricted API groups (Triton's names: {@code health}, {@code metadata},
     *     {@code inference}, {@code model-repository}, {@code model-config}, {@code statistics},
     *     {@code shared-memory})
     *     that need a header with a value over REST and gRPC; a group whose {@code header} is
     *     empty is open
     */
    public record Api(@DefaultValue Map<String, Restricted> restricted) {

        /** @param header the header (gRPC: metadata key) a request must carry; @param value its value */
        public record Restricted(@DefaultValue("") String header, @DefaultValue("") String value) {}

        public RestrictedApis restrictedApis() {
            Map<RestrictedApis.Group, RestrictedApis.Key> keys = new EnumMap<>(RestrictedApis.Group.class);
            for (var e : restricted.entrySet()) {
                var group = Arrays.stream(RestrictedApis.Group.values())
                        .filter(g -> g.tritonName().equals(e.getKey())).findFirst()
                        .orElseThrow(() -> new IllegalArgumentException("etserve.api.restricted." + e.getKey()
                                + ": no such API group (" + Arrays.stream(RestrictedApis.Group.values())
                                        .map(RestrictedApis.Group::tritonName).collect(Collectors.joining(", ")) + ")"));
                if (!e.getValue().header().isBlank()) {
                    try {
                        keys.put(group, new RestrictedApis.Key(e.getValue().header(), e.getValue().value()));
                    } catch (IllegalArgumentException bad) {
                        throw new IllegalArgumentException("etserve.api.restricted." + e.getKey() + ": " + bad.getMessage());
                    }
                }
            }
            return new RestrictedApis(keys);
        }
    }

    /**
     * Triton's system shared-memory extension (docs/api.md#shared-memory).
     *
     * @param enabled whether clients may register regions of POSIX shared-memory objects (as
     *     Triton's {@code --allow-client-shm}): any client that reaches a port could then read and
     *     write every such object the service's user may open, so it is off unless set
     * @param maxRegions most regions registered at once
     */
    public record SharedMemory(@DefaultValue("false") boolean enabled, @DefaultValue("64") int maxRegions) {
        public SharedMemory {
            if (maxRegions < 0) {
                throw new IllegalArgumentException("etserve.shared-memory.max-regions must be >= 0, was " + maxRegions);
            }
        }
    }

    /**
     * The HTTP ports' defences against slow clients (bodies: {@link Inference#bodyTimeout()}).
     *
     * @param headerTimeout longest a request head (request line and headers) may take to arrive,
     *     from the connection's opening or the head's first byte; the connection is closed after it
     * @param acceptQueueSize connections the kernel may hold that the server has not accepted yet
     *     (the listen backlog; the kernel caps it at {@code net.core.somaxconn})
     * @param inputBufferSize bytes one read from a connection takes at most (Jetty's request
     *     buffer, held only while a thread parses what was read, and kept in the connector's pool
     *     at any size: {@link ConnectionBufferPool})
     * @param inlineBelow a REST inference whose body came with its head, to a model with an idle
     *     CPU instance, no batching, static input shapes and forward calls under this lately, runs
     *     on the selector thread that read it while requests of other connections keep that
     *     selector busy, instead of a request thread (0: every request on a request thread; off
     *     while tracing and with virtual threads; docs/api.md)
     * @param inlineAloneBelow a REST inference whose body came with its head, from a connection
     *     alone on its selector thread, to a model (CPU or GPU) with no batching, static input
     *     shapes and forward calls under this lately, runs on that selector thread when an
     *     instance is free at once: the selector serves nobody else, so the call delays no other
     *     connection's request, and it spares a hand-off and a wake-up (0: never, the setting for
     *     a client that shares the service's few cores; off while tracing; docs/api.md)
     */
    public record Http(@DefaultValue("10s") Duration headerTimeout, @DefaultValue("4096") int acceptQueueSize,
            @DefaultValue("64KB") DataSize inputBufferSize, @DefaultValue("250us") Duration inlineBelow,
            @DefaultValue("20ms") Duration inlineAloneBelow) {

        public Http {
            if (headerTimeout.isNegative() || headerTimeout.isZero()) {
                throw new IllegalArgumentException("etserve.http.header-timeout must be positive");
            }
            atLeastOne("etserve.http.accept-queue-size", acceptQueueSize);
            if (inputBufferSize.toBytes() < 8192 || inputBufferSize.toBytes() > 16 << 20) {
                throw new IllegalArgumentException("etserve.http.input-buffer-size must be 8KB to 16MB");
            }
            if (inlineBelow.isNegative()) {
                throw new IllegalArgumentException("etserve.http.inline-below must not be negative");
            }
            if (inlineAloneBelow.isNegative()) {
                throw new IllegalArgumentException("etserve.http.inline-alone-below must not be negative");
            }
        }

        /** Whether any inference may run on the selector thread that read it. */
        public boolean inlinesAny() {
            return !inlineBelow.isZero() || !inlineAloneBelow.isZero();
        }

        /**
         * Selector threads for {@code cores} when {@code server.jetty.threads.selectors} does not
         * say, while calls may run on the selectors: one per core. No more selectors running calls
         * than cores to run them, so they do not take turns for a core a time slice at a time;
         * no fewer, so the calls of many connections can use every core the service is given
         * (bench/results/2026-12-06-selectors-per-core.md). A client or sidecar sharing a few
         * cores with the service does better with fewer (docs/api.md).
         */
        public static int selectorsFor(int cores) {
            return Math.max(1, cores);
        }
    }

    /**
     * @param failFastCallerStream refuse to start unless exactly one caller-stream library is loaded
     * @param warmProbes answer the health probes once on a thread of their own during the start,
     *     so the first real probe does not pay for preparing the answer
     */
    public record Health(@DefaultValue("true") boolean failFastCallerStream, @DefaultValue("true") boolean warmProbes) {}
}
