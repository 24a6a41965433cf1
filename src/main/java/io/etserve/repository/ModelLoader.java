package io.etserve.repository;

import io.etserve.cuda.QueuePolicy;
import io.etserve.cuda.StreamPool;
import io.etserve.cuda.StreamPools;
import io.etserve.execution.CpuInstancePool;
import io.etserve.execution.DynamicBatcher;
import io.etserve.execution.FaultListener;
import io.etserve.execution.GpuInstancePool;
import io.etserve.execution.InstancePool;
import io.etserve.execution.LoadedModel;
import io.etserve.execution.MultiDeviceInstancePool;
import io.etserve.inference.DataType;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.TensorMetadata;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.runtime.ExecuTorchException;
import io.etserve.runtime.FirstCallTrial;
import io.etserve.runtime.MethodSignature;
import io.etserve.runtime.Program;
import io.etserve.runtime.ProgramInstance;
import io.etserve.runtime.StreamSelection;
import io.etserve.runtime.TensorSpec;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * Turns one {@code <model>/<version>/model.pte} into a {@link ModelVersionState}: loads and
 * verifies the program, maps its signature to protocol names and types, checks that this node
 * can run its delegates, decides CPU or GPU placement, and creates the instances ({@code instances}
 * Modules per device it is placed on, or on the CPU). Never throws for a bad model: the state
 * says what went wrong.
 *
 * <p>A program none of whose methods uses a GPU delegate ({@code etserve.cuda.gpu-backends})
 * runs on the CPU even on a GPU node: no stream, no guard, untouched by device faults.
 */
public final class ModelLoader {

    private final ProgramIntegrity.Policy integrity;
    private final FirstCallTrial firstCall;
    private final StreamPools streamPools;
    private final NodeCapabilities node;
    private final Instances defaultInstances;
    private final Set<String> gpuBackends;
    private final long defaultMaxElements;
    private final DevicePlacement.Policy placement;
    private final PlannedMemoryLimits plannedLimits;
    private final FaultListener faults;
    private final PrivateCopies copies;
    private final QueuePolicy queuePolicy;
    private final WarmupCalls.RequestDecoder warmupFiles;
    private final AtomicInteger loadedModels = new AtomicInteger();

    /** Modules per model unless its config.yml sets {@code instances}. */
    public record Instances(int cpu, int perGpu) {
        public Instances {
            if (cpu < 1 || perGpu < 1) {
                throw new IllegalArgumentException("default instances must be at least 1");
            }
        }
    }

    /**
     * Planned working memory a model file may ask for: each instance allocates its method's
     * planned buffers, sized by the file, so an untrusted 5 KB program could otherwise ask for
     * gigabytes per instance.
     *
     * @param perInstance default cap for one instance (config.yml {@code max-planned-memory} overrides)
     * @param perModel cap for all instances of one model version together
     */
    public record PlannedMemoryLimits(long perInstance, long perModel) {}

    /**
     * @param verification the configured check: {@code MINIMAL} only applies to files whose
     *     declared sha256 matched (see {@link ProgramIntegrity})
     * @param gpuBackends delegates that run on a CUDA device: a program using one of them is a GPU model
     * @param warmupFiles decodes warm-up files: the protocol's request decoder
     */
    public ModelLoader(Program.Verification verification, StreamPools streamPools, NodeCapabilities node,
            Instances defaultInstances, Set<String> gpuBackends, long defaultMaxElements,
            DevicePlacement.Policy placement, PlannedMemoryLimits plannedLimits, WarmupCalls.RequestDecoder warmupFiles) {
        this(ProgramIntegrity.Policy.of(verification), FirstCallTrial.off(), streamPools, node, defaultInstances,
                gpuBackends,
                defaultMaxElements, placement,
                plannedLimits, PrivateCopies.none(), QueuePolicy.DEFAULT, warmupFiles, FaultListener.NONE);
    }

    /**
     * @param integrity what every file must be: its verification, and whether it must declare a digest
     * @param firstCall which programs run their first call in a process of their own before they load
     * @param copies where versions are served from: private copies, or the repository itself
     * @param queuePolicy the order of every line a request waits in (instances, a batch)
     * @param faults told of a warm-up call's failure, as of a served call's
     */
    public ModelLoader(ProgramIntegrity.Policy integrity, FirstCallTrial firstCall, StreamPools streamPools,
            NodeCapabilities node,
            Instances defaultInstances, Set<String> gpuBackends, long defaultMaxElements,
            DevicePlacement.Policy placement, PlannedMemoryLimits plannedLimits, PrivateCopies copies,
            QueuePolicy queuePolicy, WarmupCalls.RequestDecoder warmupFiles, FaultListener faults) {
        this.faults = faults;
        this.copies = copies;
        this.warmupFiles = Objects.requireNonNull(warmupFiles, "warmupFiles");
        this.queuePolicy = queuePolicy;
        this.integrity = integrity;
        this.firstCall = Objects.requireNonNull(firstCall, "firstCall");
        this.streamPools = streamPools;
        this.node = node;
        this.defaultInstances = defaultInstances;
        this.gpuBackends = Set.copyOf(gpuBackends);
        this.defaultMaxElements = defaultMaxElements;
        this.placement = placement;
        this.plannedLimits = plannedLimits;
    }

    /**
     * Whether the models' devices depend on the order they load in: {@code spread} over several
     * served devices gives each GPU model the next device in turn.
     */
    public boolean placesInLoadOrder() {
        return placement == DevicePlacement.Policy.SPREAD && streamPools.all().size() > 1;
    }

    public ModelVersionState load(String name, String version, Path file, ModelConfig config) {
        PrivateCopies.Copy served = null;
        Program program;
        try {
            List<Path> data = dataFiles(file, config);
            served = copies.copy(name, version, file, data);
            ProgramIntegrity.Verdict verdict = ProgramIntegrity.check(file, served.program(), config, integrity);
            for (int i = 0; i < data.size(); i++) {
                ProgramIntegrity.checkDataFile(data.get(i), served.dataFiles().get(i), integrity.digestRequired());
            }
            FirstCallTrial.Outcome trial = firstCall.run(served.program(), served.dataFiles(), config.method(),
                    verdict.verification(), config.maxPlannedMemory().orElse(plannedLimits.perInstance()),
                    config.placement().orElse(null) == ModelConfig.Placement.GPU);
            if (trial.refusesLoad()) {
                closeQuietly(served);
                return new ModelVersionState.Failed(name, version, inRepository(refusal(file, trial), served, file));
            }
            program = Program.load(served.program(), verdict.verification(), served.dataFiles());
        } catch (InvalidModelException e) {
            closeQuietly(served);
            return new ModelVersionState.Failed(name, version, inRepository(e.getMessage(), served, file));
        } catch (ExecuTorchException e) {
            closeQuietly(served);
            return new ModelVersionState.Failed(name, version, "cannot load " + file.getFileName() + ": "
                    + inRepository(e.getMessage(), served, file));
        } catch (IOException e) {
            closeQuietly(served);
            return new ModelVersionState.Failed(name, version, "cannot open the data files of " + file.getFileName()
                    + ": " + inRepository(e.getMessage(), served, file));
        }
        ModelVersionState state = load(name, version, file, config, program);
        if (state instanceof ModelVersionState.Ready ready) {
            ready.model().deleteOnClose(served::close);
            return state;
        }
        served.close();  // the program was freed: only the description (if any) is kept
        return state instanceof ModelVersionState.Failed f
                ? new ModelVersionState.Failed(name, version, inRepository(f.reason(), served, file)) : state;
    }

    private static String refusal(Path file, FirstCallTrial.Outcome trial) {
        String what = file.getFileName() + " was not loaded: its first call, tried in a separate process on "
                + "zero-filled inputs, ";
        if (trial instanceof FirstCallTrial.Outcome.Crashed c) {
            if (c.signal().equals(FirstCallTrial.KILLED)) {
                return what + "was killed (SIGKILL) twice, the second time with no other trial beside it: the"
                        + " kernel's OOM killer ends the trial's process first when the host or pod runs short of"
                        + " memory, so loading it here would most likely end the service (its call needs more memory"
                        + " than is free)";
            }
            return what + "ended that process with " + c.signal() + "; in this one it would end the service"
                    + (c.log().isEmpty() ? "" : " (" + lastLines(c.log()) + ")");
        }
        if (trial instanceof FirstCallTrial.Outcome.TimedOut t) {
            return what + "did not end within " + t.limit().toSeconds()
                    + " s (etserve.repository.first-call-trial-timeout)";
        }
        throw new IllegalArgumentException("not a refusal: " + trial);
    }

    /** ExecuTorch's last two lines before the process died, on one line. */
    private static String lastLines(String log) {
        List<String> lines = log.lines().toList();
        return String.join(" / ", lines.subList(Math.max(0, lines.size() - 2), lines.size()));
    }

    /** A message about the private copy, told about the repository's files (which operators know). */
    private static String inRepository(String message, PrivateCopies.Copy served, Path file) {
        if (message == null || served == null || served.directory() == null) {
            return message;
        }
        return message.replace(served.directory().toString(), file.toAbsolutePath().getParent().toString());
    }

    private static void closeQuietly(PrivateCopies.Copy copy) {
        if (copy != null) {
            copy.close();
        }
    }

    private ModelVersionState load(String name, String version, Path file, ModelConfig config, Program program) {
        List<ProgramInstance> created = new ArrayList<>();
        try {
            List<String> methods = program.methodNames();
            if (!methods.contains(config.method())) {
                program.close();
                return new ModelVersionState.Failed(name, version, "the program has no method '" + config.method()
                        + "' (it has " + methods + ")");
            }
            MethodSignature signature = program.signature(config.method());
            long maxElements = config.maxElementsPerTensor().orElse(defaultMaxElements);

            Optional<String> notRunnable = node.whyNotRunnable(signature);
            if (notRunnable.isPresent()) {
                // Only the description is kept (metadata is still served); the program is freed.
                ModelDescription description = describe(name, version, signature, config, false);
                program.close();
                return new ModelVersionState.Unavailable(description, notRunnable.get());
            }
            Optional<String> gpuDelegate = gpuDelegate(program, methods);
            long perInstanceCap = config.maxPlannedMemory().orElse(plannedLimits.perInstance());
            if (signature.plannedBytes() > perInstanceCap) {
                throw new InvalidModelException("method '" + config.method() + "' plans " + signature.plannedBytes()
                        + " bytes of working memory per instance, over the limit of " + perInstanceCap
                        + " (max-planned-memory in config.yml raises it for this model)");
            }
            ModelConfig.Placement where = config.placement()
                    .orElse(gpuDelegate.isPresent() ? ModelConfig.Placement.GPU : ModelConfig.Placement.CPU);
            if (where == ModelConfig.Placement.CPU && gpuDelegate.isPresent()) {
                throw new InvalidModelException("config.yml says placement: cpu, but " + gpuDelegate.get()
                        + ", which runs on a CUDA device");
            }
            List<Integer> served = streamPools.all().stream().map(StreamPool::device).toList();
            List<Integer> devices = where == ModelConfig.Placement.GPU
                    ? DevicePlacement.choose(name, signature.backends(), config.devices(), served, placement,
                            loadedModels.getAndIncrement())
                    : List.of();
            InstancePool pool;
            // Per device for a GPU placement, in all for the CPU.
            int perPlacement = config.instances().orElse(devices.isEmpty() ? defaultInstances.cpu()
                    : defaultInstances.perGpu());
            int instanceCount = perPlacement * Math.max(1, devices.size());
            long modelPlanned = signature.plannedBytes() > Long.MAX_VALUE / instanceCount ? Long.MAX_VALUE
                    : signature.plannedBytes() * instanceCount;
            if (modelPlanned > plannedLimits.perModel()) {
                throw new InvalidModelException(instanceCount + " instances x " + signature.plannedBytes()
                        + " bytes of planned memory = " + modelPlanned + " bytes, over the per-model limit of "
                        + plannedLimits.perModel() + " (etserve.inference.max-planned-memory-per-model)");
            }
            if (!devices.isEmpty()) {
                List<GpuInstancePool> pools = new ArrayList<>();
                for (int device : devices) {
                    StreamPool streams = streamPools.forDevice(device).orElseThrow();
                    // A real device's instances initialize their delegates there; with opaque
                    // handles (tests without a GPU) there is no device to make current.
                    int cudaDevice = streams.selectionMode() == StreamSelection.Mode.CUDA ? device : -1;
                    List<ProgramInstance> onDevice = new ArrayList<>();
                    for (int i = 0; i < perPlacement; i++) {
                        ProgramInstance instance = program.newInstance(config.method(), cudaDevice,
                                config.cpuThreadpool());
                        created.add(instance);  // at once: a later instance that fails must not leak this one
                        onDevice.add(instance);
                    }
                    pools.add(new GpuInstancePool(streams, onDevice, queuePolicy));
                }
                pool = pools.size() == 1 ? pools.get(0) : new MultiDeviceInstancePool(pools);
            } else {
                // CPU programs, and GPU-placed ones on a node without CUDA devices (whyNotRunnable
                // already refused those whose delegates need one).
                for (int i = 0; i < perPlacement; i++) {
                    created.add(program.newInstance(config.method(), -1, config.cpuThreadpool()));
                }
                pool = new CpuInstancePool(created, queuePolicy);
            }
            // Described once the instances exist: only a loaded method knows which tensors may change shape.
            ModelDescription description = describe(name, version, created.get(0).signature(), config, true);
            WarmupCalls.run(config.warmup(), pool, description, maxElements, file.toAbsolutePath().getParent(),
                    warmupFiles, faults);
            DynamicBatcher batcher = null;
            if (config.dynamicBatching().isPresent()) {
                config.dynamicBatching().get().checkFits(description);
                batcher = new DynamicBatcher(name, version, pool, config.dynamicBatching().get(), queuePolicy);
            }
            return new ModelVersionState.Ready(new LoadedModel(description, program, pool, maxElements, batcher,
                    config));
        } catch (RuntimeException | Error e) {
            created.forEach(ProgramInstance::close);
            program.close();
            if (e instanceof Error error) {
                throw error;  // out of memory (a warm-up's direct buffers) or the like: nothing of this load is kept
            }
            // ExecuTorch errors, a config that does not fit the program, an impossible placement:
            // this model fails, the others still load.
            return new ModelVersionState.Failed(name, version, e.getMessage());
        }
    }

    /** The first GPU delegate any method of the program uses, described for messages. */
    private Optional<String> gpuDelegate(Program program, List<String> methods) {
        for (String method : methods) {
            for (String backend : program.signature(method).backends()) {
                if (gpuBackends.contains(backend)) {
                    return Optional.of("method '" + method + "' uses " + backend);
                }
            }
        }
        return Optional.empty();
    }

    /** The files config.yml lists under {@code data-files}, else every {@code *.ptd} beside the program. */
    static List<Path> dataFiles(Path program, ModelConfig config) throws IOException {
        if (config.dataFiles().isPresent()) {
            Path dir = program.toAbsolutePath().getParent();
            List<Path> listed = new ArrayList<>();
            for (String name : config.dataFiles().get()) {
                Path f = dir.resolve(name);
                if (!Files.isRegularFile(f)) {
                    throw new IOException("data file '" + name + "' listed in config.yml is not in "
                            + dir.getFileName());
                }
                listed.add(f);
            }
            return listed;
        }
        return dataFiles(program);
    }

    /** The named-data files of a version: every {@code *.ptd} beside its program, in name order. */
    static List<Path> dataFiles(Path program) throws IOException {
        Path dir = program.toAbsolutePath().getParent();
        try (Stream<Path> files = Files.list(dir)) {
            return files.filter(f -> f.getFileName().toString().endsWith(".ptd")).sorted().toList();
        }
    }

    /**
     * Applies config.yml's {@code dims}: ExecuTorch tells only that a whole tensor is dynamic;
     * the config may fix some of its dimensions. Checked against the loaded method: a static
     * tensor cannot be made to vary, and no size may pass the planned upper bound.
     */
    static List<TensorMetadata> withConfiguredDims(List<TensorMetadata> inputs, List<TensorSpec> specs,
            Map<String, List<Long>> dims) {
        for (String name : dims.keySet()) {
            if (inputs.stream().noneMatch(t -> t.name().equals(name))) {
                throw new InvalidModelException("config.yml gives dims for '" + name + "', which is not an input");
            }
        }
        List<TensorMetadata> out = new ArrayList<>(inputs.size());
        for (int i = 0; i < inputs.size(); i++) {
            TensorMetadata t = inputs.get(i);
            List<Long> configured = dims.get(t.name());
            if (configured == null) {
                out.add(t);
                continue;
            }
            long[] bounds = specs.get(i).sizes();
            if (configured.size() != bounds.length) {
                throw new InvalidModelException("config.yml dims " + configured + " of input '" + t.name() + "' have "
                        + configured.size() + " dimensions; the method's input has " + bounds.length);
            }
            long[] shape = new long[bounds.length];
            for (int d = 0; d < bounds.length; d++) {
                long size = configured.get(d);
                if (!specs.get(i).dynamic() && size != bounds[d]) {
                    throw new InvalidModelException("input '" + t.name() + "' is static in the program, shape "
                            + Arrays.toString(bounds) + "; config.yml dims " + configured + " cannot change it");
                }
                if (size > bounds[d]) {
                    throw new InvalidModelException("config.yml dims " + configured + " of input '" + t.name()
                            + "': dimension " + d + " is " + size + ", over the program's bound " + bounds[d]);
                }
                shape[d] = size;
            }
            out.add(new TensorMetadata(t.name(), t.dataType(), shape));
        }
        return out;
    }

    /**
     * {@code signature} under the protocol's names and types.
     *
     * @param loaded whether it is a loaded instance's (which knows which tensors are dynamic, so
     *     config.yml's {@code dims} can be checked against it) or only the program's
     */
    private static ModelDescription describe(String name, String version, MethodSignature signature,
            ModelConfig config, boolean loaded) {
        List<TensorMetadata> inputs = describe("input", signature.inputs(), config.inputNames());
        if (loaded) {
            inputs = withConfiguredDims(inputs, signature.inputs(), config.inputDims());
        }
        return new ModelDescription(name, version, signature, inputs,
                describe("output", signature.outputs(), config.outputNames()));
    }

    private static List<TensorMetadata> describe(String kind, List<TensorSpec> specs, List<String> names) {
        if (!names.isEmpty() && names.size() != specs.size()) {
            throw new InvalidModelException("config.yml names " + names.size() + " " + kind + "s but the method has "
                    + specs.size());
        }
        List<TensorMetadata> out = new ArrayList<>(specs.size());
        for (int i = 0; i < specs.size(); i++) {
            TensorSpec spec = specs.get(i);
            if (!spec.tensor()) {
                throw new InvalidModelException(kind + " " + i + " is not a tensor; only tensor " + kind
                        + "s can be served");
            }
            int code = spec.scalarType();
            int index = i;
            DataType type = DataType.fromExecutorch(code).orElseThrow(
                    () -> new InvalidModelException(kind + " " + index + " has ExecuTorch dtype " + code
                            + ", which the protocol cannot carry"));
            String name = names.isEmpty() ? kind + "__" + i : names.get(i);
            long[] shape = spec.sizes();
            if (spec.dynamic()) {
                // ExecuTorch marks a whole tensor dynamic: every dimension may vary up to its bound.
                Arrays.fill(shape, -1);
            }
            out.add(new TensorMetadata(name, type, shape));
        }
        return out;
    }

    /** The program loaded but cannot be served as configured. */
    static final class InvalidModelException extends RuntimeException {
        InvalidModelException(String message) {
            super(message);
        }
    }
}
