package io.etserve.triton;

import io.etserve.grpc.protocol.ModelInput;
import io.etserve.grpc.protocol.ModelOutput;
import io.etserve.inference.UntrustedText;
import io.etserve.modelconfig.DynamicBatching;
import io.etserve.modelconfig.ModelConfig;
import io.etserve.modelconfig.VersionPolicy;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.UnaryOperator;
import tools.jackson.core.JacksonException;
import tools.jackson.core.StreamReadFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A load request's {@code config} parameter: a Triton model configuration as JSON (what
 * {@code tritonclient}'s {@code load_model(..., config=...)} and Model Analyzer send), mapped
 * onto the model's config.yml for that load:
 * <ul>
 *   <li>{@code instance_group[0].count} -> {@code instances} (per GPU for KIND_GPU, in all for
 *       KIND_CPU), its {@code kind} -> {@code placement}, its {@code gpus} -> {@code devices};
 *   <li>{@code dynamic_batching} with {@code max_batch_size} -> {@code dynamic-batching}; a
 *       document without {@code dynamic_batching} turns batching off, as it describes the whole
 *       model (Triton replaces the configuration with it);
 *   <li>{@code version_policy} -> {@code version-policy}.
 * </ul>
 * What it also says must agree with the model ({@code name}, {@code platform}, the tensors) or
 * be the default of a feature this service does not have; anything else is refused, naming the
 * field, before anything loads. Keys may be snake_case (Triton's) or lowerCamelCase (protobuf
 * JSON's default); 64-bit numbers may be strings, as protobuf's JSON writes them.
 */
public final class ConfigOverride implements UnaryOperator<ModelConfig> {

    /** Longest document accepted: a real configuration is a few KB. */
    static final int MAX_CHARS = 256 * 1024;

    private static final JsonMapper JSON = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();

    /** Fields of Triton's ModelConfig this service cannot honour unless they hold their default. */
    private static final Map<String, String> UNSUPPORTED = Map.ofEntries(
            Map.entry("sequence_batching", "etserve has no sequence batcher (stateful models)"),
            Map.entry("ensemble_scheduling", "etserve has no ensembles"),
            Map.entry("optimization", "optimization policies do not apply to ExecuTorch programs"),
            Map.entry("model_warmup", "warm-up is set in config.yml (warmup)"),
            Map.entry("parameters", "model parameters are not supported"),
            Map.entry("cc_model_filenames", "compute-capability file names do not apply"),
            Map.entry("metric_tags", "metric tags are not supported"),
            Map.entry("batch_input", "batch inputs are not supported"),
            Map.entry("batch_output", "batch outputs are not supported"),
            Map.entry("model_operations", "custom operation libraries are not supported"),
            Map.entry("model_repository_agents", "repository agents are not supported"),
            Map.entry("model_metrics", "per-model metric options are not supported"),
            Map.entry("runtime", "the runtime is ExecuTorch"));

    /** Triton's {@code scheduling_choice} fields this service cannot honour, present even when empty. */
    private static final Set<String> SCHEDULING_CHOICES = Set.of("sequence_batching", "ensemble_scheduling");

    private final String model;
    private final Optional<Integer> maxBatchSize;
    private final Optional<DynamicBatching> dynamicBatching;
    private final Optional<InstanceGroup> instanceGroup;
    private final Optional<VersionPolicy> versionPolicy;
    private final List<TensorEntry> inputs;
    private final List<TensorEntry> outputs;

    /** {@code dynamic_batching}: its delay and preferred sizes (the bound is {@code max_batch_size}). */
    record DynamicBatchingEntry(Duration maxQueueDelay, List<Integer> preferredBatchSizes) {}

    /** {@code instance_group[0]}: placement empty for KIND_AUTO; devices empty when no {@code gpus}. */
    record InstanceGroup(int count, Optional<ModelConfig.Placement> placement, Optional<List<Integer>> devices) {}

    /** An {@code input} or {@code output} entry: what it says, to be checked against the model. */
    record TensorEntry(String field, String name, Optional<String> dataType, Optional<List<Long>> dims) {}

    private ConfigOverride(String model, Optional<Integer> maxBatchSize, Optional<DynamicBatching> dynamicBatching,
            Optional<InstanceGroup> instanceGroup, Optional<VersionPolicy> versionPolicy, List<TensorEntry> inputs,
            List<TensorEntry> outputs) {
        this.model = model;
        this.maxBatchSize = maxBatchSize;
        this.dynamicBatching = dynamicBatching;
        this.instanceGroup = instanceGroup;
        this.versionPolicy = versionPolicy;
        this.inputs = List.copyOf(inputs);
        this.outputs = List.copyOf(outputs);
    }

    /** Thrown for a document this service cannot honour: the message names the field. */
    public static final class InvalidOverrideException extends RuntimeException {
        InvalidOverrideException(String message) {
            super(message);
        }
    }

    /**
     * Reads {@code json} for {@code model}.
     *
     * @param gpus the CUDA device ordinals this node serves (empty: KIND_GPU cannot be placed)
     * @throws InvalidOverrideException naming the first field that cannot be honoured
     */
    public static ConfigOverride parse(String model, String json, Set<Integer> gpus) {
        if (json == null || json.isBlank()) {
            throw invalid("config", "is empty; send a Triton model configuration as a JSON object");
        }
        if (json.length() > MAX_CHARS) {
            throw invalid("config", "is larger than " + MAX_CHARS / 1024 + " KiB");
        }
        JsonNode doc;
        try {
            doc = JSON.readTree(json);
        } catch (JacksonException e) {
            throw invalid("config", "is not valid JSON: " + e.getOriginalMessage());
        }
        if (doc == null || !doc.isObject()) {
            throw invalid("config", "must be a JSON object (a Triton model configuration)");
        }
        Map<String, JsonNode> fields = fields("", doc);
        Optional<Integer> maxBatchSize = Optional.empty();
        Optional<DynamicBatchingEntry> batching = Optional.empty();
        Optional<InstanceGroup> group = Optional.empty();
        Optional<VersionPolicy> policy = Optional.empty();
        List<TensorEntry> inputs = List.of();
        List<TensorEntry> outputs = List.of();
        for (Map.Entry<String, JsonNode> f : fields.entrySet()) {
            String key = f.getKey();
            JsonNode v = f.getValue();
            switch (key) {
                case "name" -> {
                    String name = string(key, v);
                    if (!name.isEmpty() && !name.equals(model)) {
                        throw invalid(key, "is '" + UntrustedText.abbreviate(name) + "'; a load's configuration must name the model it"
                                + " loads ('" + UntrustedText.abbreviate(model) + "')");
                    }
                }
                case "platform", "backend" -> {
                    String p = string(key, v);
                    if (!p.isEmpty() && !p.equals(TritonModelConfig.PLATFORM)) {
                        throw invalid(key, "is '" + UntrustedText.abbreviate(p) + "'; this server runs ExecuTorch programs only ('"
                                + TritonModelConfig.PLATFORM + "')");
                    }
                }
                case "default_model_filename" -> {
                    String file = string(key, v);
                    if (!file.isEmpty() && !file.equals("model.pte")) {
                        throw invalid(key, "must be model.pte (each version directory holds model.pte)");
                    }
                }
                case "max_batch_size" -> maxBatchSize = Optional.of((int) integer(key, v, 0, DynamicBatching.MAX_BATCH_SIZE));
                case "dynamic_batching" -> batching = Optional.of(dynamicBatching(key, v));
                case "instance_group" -> group = instanceGroup(key, v, gpus);
                case "version_policy" -> policy = Optional.of(versionPolicy(key, v));
                case "input" -> inputs = tensors(key, v, Set.of("name", "data_type", "format", "dims", "is_shape_tensor",
                        "allow_ragged_batch", "optional", "reshape", "is_non_linear_format_io"));
                case "output" -> outputs = tensors(key, v, Set.of("name", "data_type", "dims", "label_filename",
                        "is_shape_tensor", "reshape", "is_non_linear_format_io"));
                case "model_transaction_policy" -> {
                    Map<String, JsonNode> p = fields(key, v);
                    only(key, p, Set.of("decoupled"));
                    if (p.containsKey("decoupled") && bool(key + ".decoupled", p.get("decoupled"))) {
                        throw invalid(key + ".decoupled", "is true; etserve answers every request with one response");
                    }
                }
                case "response_cache" -> {
                    Map<String, JsonNode> p = fields(key, v);
                    only(key, p, Set.of("enable"));
                    if (p.containsKey("enable") && bool(key + ".enable", p.get("enable"))) {
                        throw invalid(key + ".enable", "is true; etserve has no response cache");
                    }
                }
                default -> {
                    if (UNSUPPORTED.containsKey(key)) {
                        // The scheduling choice is a oneof: its message, even empty, makes the model
                        // stateful or an ensemble; elsewhere an empty message is the default.
                        if (!isEmpty(v) || SCHEDULING_CHOICES.contains(key) && v.isObject()) {
                            throw invalid(key, "cannot be honoured: " + UNSUPPORTED.get(key));
                        }
                    } else {
                        throw invalid(key, "is not a field of Triton's model configuration");
                    }
                }
            }
        }
        int rows = maxBatchSize.orElse(0);
        if (batching.isEmpty() && rows > 0) {
            throw invalid("max_batch_size", "is " + rows + " without dynamic_batching; etserve batches requests only"
                    + " through dynamic batching: add \"dynamic_batching\": {} or set max_batch_size to 0");
        }
        Optional<DynamicBatching> batcher = Optional.empty();
        if (batching.isPresent()) {
            try {
                // max_batch_size 0 is Triton's "does not batch"
                batcher = Optional.of(DynamicBatching.of(rows > 0 ? rows : null, batching.get().maxQueueDelay(),
                        batching.get().preferredBatchSizes(), DynamicBatching.Names.TRITON));
            } catch (IllegalArgumentException e) {
                throw new InvalidOverrideException("config parameter: " + e.getMessage());
            }
        }
        return new ConfigOverride(model, maxBatchSize, batcher, group, policy, inputs, outputs);
    }

    /** config.yml's configuration with this document's instances, placement, batching and versions. */
    @Override
    public ModelConfig apply(ModelConfig c) {
        Optional<Integer> instances = instanceGroup.map(g -> g.count()).or(c::instances);
        Optional<ModelConfig.Placement> placement = instanceGroup.isPresent() && instanceGroup.get().placement().isPresent()
                ? instanceGroup.get().placement() : c.placement();
        Optional<List<Integer>> devices = instanceGroup.isPresent() && instanceGroup.get().devices().isPresent()
                ? instanceGroup.get().devices() : c.devices();
        return new ModelConfig(c.method(), c.inputNames(), c.outputNames(), instances, c.maxElementsPerTensor(), devices,
                placement, c.warmup(), c.dataFiles(), c.sha256(), c.maxPlannedMemory(), c.inputDims(), dynamicBatching,
                versionPolicy.orElse(c.versionPolicy()), c.cpuThreadpool());
    }

    /** The model this document is for. */
    public String model() {
        return model;
    }

    /** {@code max_batch_size} as the document says it (0 when absent). */
    public int maxBatchSize() {
        return maxBatchSize.orElse(0);
    }

    /**
     * Checks the document's {@code input} and {@code output} entries against what the model
     * reports with this document's batching: each must name one of its tensors, with its type and
     * dims when it gives them.
     *
     * @param reported the model's configuration as {@link TritonModelConfig} builds it for this batching
     */
    public void checkTensors(io.etserve.grpc.protocol.ModelConfig reported) {
        Map<String, ModelInput> in = new LinkedHashMap<>();
        reported.getInputList().forEach(t -> in.put(t.getName(), t));
        Map<String, ModelOutput> out = new LinkedHashMap<>();
        reported.getOutputList().forEach(t -> out.put(t.getName(), t));
        for (TensorEntry e : inputs) {
            var t = in.get(e.name());
            check(e, t == null ? null : t.getDataType().name(), t == null ? null : t.getDimsList(), in.keySet());
        }
        for (TensorEntry e : outputs) {
            var t = out.get(e.name());
            check(e, t == null ? null : t.getDataType().name(), t == null ? null : t.getDimsList(), out.keySet());
        }
    }

    private static void check(TensorEntry e, String type, List<Long> dims, Set<String> names) {
        if (type == null) {
            throw invalid(e.field() + ".name", "is '" + UntrustedText.abbreviate(e.name()) + "'; the model's are " + names);
        }
        if (e.dataType().isPresent() && !e.dataType().get().equals(type)) {
            throw invalid(e.field() + ".data_type", "is " + e.dataType().get() + "; '" + e.name() + "' is " + type);
        }
        if (e.dims().isPresent() && !e.dims().get().equals(dims)) {
            throw invalid(e.field() + ".dims", "are " + e.dims().get() + "; '" + e.name() + "' has " + dims
                    + " (without the batch dimension when max_batch_size > 0; -1 varies)");
        }
    }

    // --- the parts ----------------------------------------------------------------------------

    private static DynamicBatchingEntry dynamicBatching(String key, JsonNode v) {
        Map<String, JsonNode> f = fields(key, v);
        only(key, f, Set.of("preferred_batch_size", "max_queue_delay_microseconds", "preserve_ordering",
                "priority_levels", "default_priority_level", "default_queue_policy", "priority_queue_policy"));
        List<Integer> preferred = new ArrayList<>();
        if (f.containsKey("preferred_batch_size")) {
            JsonNode sizes = array(key + ".preferred_batch_size", f.get("preferred_batch_size"));
            for (JsonNode size : sizes) {
                preferred.add((int) integer(key + ".preferred_batch_size[]", size, 1, DynamicBatching.MAX_BATCH_SIZE));
            }
        }
        long delayMicros = f.containsKey("max_queue_delay_microseconds")
                ? integer(key + ".max_queue_delay_microseconds", f.get("max_queue_delay_microseconds"), 0,
                        DynamicBatching.MAX_QUEUE_DELAY.toNanos() / 1000)
                : 0;
        if (f.containsKey("preserve_ordering") && bool(key + ".preserve_ordering", f.get("preserve_ordering"))) {
            throw invalid(key + ".preserve_ordering", "cannot be honoured: etserve answers each request when its"
                    + " batch is done");
        }
        for (String zero : List.of("priority_levels", "default_priority_level")) {
            if (f.containsKey(zero) && integer(key + "." + zero, f.get(zero), 0, Long.MAX_VALUE) != 0) {
                throw invalid(key + "." + zero, "cannot be honoured: etserve has no request priorities");
            }
        }
        for (String policy : List.of("default_queue_policy", "priority_queue_policy")) {
            if (f.containsKey(policy) && !isEmpty(f.get(policy))) {
                throw invalid(key + "." + policy, "cannot be honoured: the queue timeout is etserve.inference."
                        + "queue-timeout, and a request's own is its timeout parameter");
            }
        }
        return new DynamicBatchingEntry(Duration.ofNanos(delayMicros * 1000), preferred);
    }

    private static Optional<InstanceGroup> instanceGroup(String key, JsonNode v, Set<Integer> gpus) {
        JsonNode groups = array(key, v);
        if (groups.isEmpty()) {
            return Optional.empty();
        }
        if (groups.size() > 1) {
            throw invalid(key, "has " + groups.size() + " groups; etserve places one group of instances per model");
        }
        String at = key + "[0]";
        Map<String, JsonNode> f = fields(at, groups.get(0));
        only(at, f, Set.of("name", "kind", "count", "gpus", "rate_limiter", "secondary_devices", "profile", "passive",
                "host_policy"));
        if (f.containsKey("name")) {
            string(at + ".name", f.get("name"));
        }
        String kind = f.containsKey("kind") ? string(at + ".kind", f.get("kind")) : "KIND_AUTO";
        int count = (int) (f.containsKey("count") ? integer(at + ".count", f.get("count"), 0, 1024) : 0);
        Optional<ModelConfig.Placement> placement = switch (kind) {
            case "KIND_AUTO", "" -> Optional.empty();
            case "KIND_CPU" -> Optional.of(ModelConfig.Placement.CPU);
            case "KIND_GPU" -> {
                if (gpus.isEmpty()) {
                    throw invalid(at + ".kind", "is KIND_GPU, but this node serves no CUDA device (it can place"
                            + " KIND_CPU or KIND_AUTO)");
                }
                yield Optional.of(ModelConfig.Placement.GPU);
            }
            case "KIND_MODEL" -> throw invalid(at + ".kind", "is KIND_MODEL; etserve places instances itself"
                    + " (KIND_CPU, KIND_GPU or KIND_AUTO)");
            default -> throw invalid(at + ".kind", "is '" + UntrustedText.abbreviate(kind) + "'; expected KIND_AUTO, KIND_CPU or"
                    + " KIND_GPU");
        };
        Optional<List<Integer>> devices = Optional.empty();
        if (f.containsKey("gpus") && !array(at + ".gpus", f.get("gpus")).isEmpty()) {
            if (placement.equals(Optional.of(ModelConfig.Placement.CPU))) {
                throw invalid(at + ".gpus", "are given for KIND_CPU");
            }
            List<Integer> list = new ArrayList<>();
            for (JsonNode g : f.get("gpus")) {
                int device = (int) integer(at + ".gpus[]", g, 0, 1023);
                if (!gpus.contains(device)) {
                    throw invalid(at + ".gpus", "name device " + device + ", which this node does not serve (it serves "
                            + new TreeSet<>(gpus) + ")");
                }
                if (!list.contains(device)) {
                    list.add(device);
                }
            }
            devices = Optional.of(List.copyOf(list));
            if (placement.isEmpty()) {
                placement = Optional.of(ModelConfig.Placement.GPU);
            }
        }
        for (String field : List.of("rate_limiter", "secondary_devices", "profile")) {
            if (f.containsKey(field) && !isEmpty(f.get(field))) {
                throw invalid(at + "." + field, "cannot be honoured by etserve");
            }
        }
        if (f.containsKey("passive") && bool(at + ".passive", f.get("passive"))) {
            throw invalid(at + ".passive", "cannot be honoured: every instance takes requests");
        }
        if (f.containsKey("host_policy") && !string(at + ".host_policy", f.get("host_policy")).isEmpty()) {
            throw invalid(at + ".host_policy", "cannot be honoured by etserve");
        }
        // Triton reads a count of 0 (proto3's default, left out of protobuf JSON) as 1.
        return Optional.of(new InstanceGroup(Math.max(1, count), placement, devices));
    }

    private static VersionPolicy versionPolicy(String key, JsonNode v) {
        Map<String, JsonNode> f = fields(key, v);
        only(key, f, Set.of("latest", "all", "specific"));
        if (f.size() != 1) {
            throw invalid(key, "must hold one of latest, all or specific");
        }
        if (f.containsKey("all")) {
            fields(key + ".all", f.get("all"));
            return VersionPolicy.ALL;
        }
        if (f.containsKey("latest")) {
            Map<String, JsonNode> l = fields(key + ".latest", f.get("latest"));
            only(key + ".latest", l, Set.of("num_versions"));
            long n = l.containsKey("num_versions") ? integer(key + ".latest.num_versions", l.get("num_versions"), 1, 1024)
                    : 0;
            if (n < 1) {
                throw invalid(key + ".latest.num_versions", "must be at least 1");
            }
            return VersionPolicy.latest((int) n);
        }
        Map<String, JsonNode> s = fields(key + ".specific", f.get("specific"));
        only(key + ".specific", s, Set.of("versions"));
        List<Long> versions = new ArrayList<>();
        if (s.containsKey("versions")) {
            for (JsonNode n : array(key + ".specific.versions", s.get("versions"))) {
                versions.add(integer(key + ".specific.versions[]", n, 1, Long.MAX_VALUE));
            }
        }
        if (versions.isEmpty()) {
            throw invalid(key + ".specific.versions", "must list at least one version");
        }
        return VersionPolicy.specific(versions);
    }

    private static List<TensorEntry> tensors(String key, JsonNode v, Set<String> allowed) {
        List<TensorEntry> out = new ArrayList<>();
        JsonNode list = array(key, v);
        for (int i = 0; i < list.size(); i++) {
            String at = key + "[" + i + "]";
            Map<String, JsonNode> f = fields(at, list.get(i));
            only(at, f, allowed);
            if (!f.containsKey("name")) {
                throw invalid(at + ".name", "is missing");
            }
            String name = string(at + ".name", f.get("name"));
            if (out.stream().anyMatch(e -> e.name().equals(name))) {
                throw invalid(at + ".name", "is '" + UntrustedText.abbreviate(name) + "' a second time");
            }
            Optional<String> type = f.containsKey("data_type")
                    ? Optional.of(string(at + ".data_type", f.get("data_type"))) : Optional.empty();
            Optional<List<Long>> dims = Optional.empty();
            if (f.containsKey("dims")) {
                List<Long> d = new ArrayList<>();
                for (JsonNode n : array(at + ".dims", f.get("dims"))) {
                    d.add(integer(at + ".dims[]", n, -1, Long.MAX_VALUE));
                }
                dims = Optional.of(d);
            }
            for (String flag : List.of("is_shape_tensor", "allow_ragged_batch", "optional", "is_non_linear_format_io")) {
                if (f.containsKey(flag) && bool(at + "." + flag, f.get(flag))) {
                    throw invalid(at + "." + flag, "cannot be honoured: ExecuTorch methods take every input, as"
                            + " dense tensors");
                }
            }
            if (f.containsKey("format") && !"FORMAT_NONE".equals(string(at + ".format", f.get("format")))) {
                throw invalid(at + ".format", "cannot be honoured: tensors are passed as the program declares them");
            }
            if (f.containsKey("reshape") && !isEmpty(f.get("reshape"))) {
                throw invalid(at + ".reshape", "cannot be honoured by etserve");
            }
            if (f.containsKey("label_filename") && !string(at + ".label_filename", f.get("label_filename")).isEmpty()) {
                throw invalid(at + ".label_filename", "cannot be honoured: etserve has no classification extension");
            }
            out.add(new TensorEntry(key, name, type, dims));
        }
        return out;
    }

    // --- JSON helpers -------------------------------------------------------------------------

    /** An object's fields under snake_case names (protobuf JSON's lowerCamelCase converted). */
    private static Map<String, JsonNode> fields(String key, JsonNode v) {
        if (v == null || !v.isObject()) {
            throw invalid(key.isEmpty() ? "config" : key, "must be a JSON object");
        }
        Map<String, JsonNode> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = v.properties().iterator(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            String name = snake(e.getKey());
            if (out.put(name, e.getValue()) != null) {
                throw invalid((key.isEmpty() ? "" : key + ".") + name, "is given twice");
            }
        }
        return out;
    }

    private static void only(String key, Map<String, JsonNode> fields, Set<String> allowed) {
        for (String name : fields.keySet()) {
            if (!allowed.contains(name)) {
                throw invalid(key + "." + UntrustedText.abbreviate(name), "is not a field etserve knows there");
            }
        }
    }

    static String snake(String key) {
        StringBuilder b = new StringBuilder(key.length() + 4);
        for (int i = 0; i < key.length(); i++) {
            char c = key.charAt(i);
            if (c >= 'A' && c <= 'Z') {
                b.append('_').append((char) (c + ('a' - 'A')));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    private static JsonNode array(String key, JsonNode v) {
        if (v == null || !v.isArray()) {
            throw invalid(key, "must be a JSON array");
        }
        return v;
    }

    private static String string(String key, JsonNode v) {
        if (v == null || !v.isString()) {
            throw invalid(key, "must be a string");
        }
        return v.asString();
    }

    private static boolean bool(String key, JsonNode v) {
        if (v == null || !v.isBoolean()) {
            throw invalid(key, "must be true or false");
        }
        return v.asBoolean();
    }

    /** A whole number in {@code [min, max]}: a JSON integer, or a string of one (protobuf JSON's 64-bit form). */
    private static long integer(String key, JsonNode v, long min, long max) {
        BigInteger whole;
        if (v != null && v.isIntegralNumber()) {
            whole = v.bigIntegerValue();
        } else if (v != null && v.isString() && v.asString().matches("-?[0-9]+")) {
            whole = new BigInteger(v.asString());
        } else {
            throw invalid(key, "must be a whole number");
        }
        if (whole.bitLength() > 63) {
            throw invalid(key, "must be " + min + ".." + max + ", got a larger number");  // past 64 bits
        }
        long n = whole.longValue();
        if (n < min || n > max) {
            throw invalid(key, "must be " + min + ".." + max + ", got " + n);
        }
        return n;
    }

    /** Absent in effect: null, {}, [], "", false or 0 (what protobuf JSON writes for a default). */
    private static boolean isEmpty(JsonNode v) {
        if (v == null || v.isNull()) {
            return true;
        }
        if (v.isObject() || v.isArray()) {
            for (JsonNode child : v) {
                if (!isEmpty(child)) {
                    return false;
                }
            }
            return true;
        }
        return v.isString() && v.asString().isEmpty() || v.isBoolean() && !v.asBoolean()
                || v.isNumber() && v.asDouble() == 0;
    }

    private static InvalidOverrideException invalid(String field, String what) {
        return new InvalidOverrideException("config parameter: '" + field + "' " + what);
    }

    @Override
    public String toString() {
        return "ConfigOverride[" + model + ", max_batch_size " + maxBatchSize() + ", batching "
                + dynamicBatching.isPresent() + ", " + instanceGroup.map(Object::toString).orElse("no instance_group")
                + ", " + versionPolicy.map(p -> p.kind().name().toLowerCase(Locale.ROOT)).orElse("config.yml versions")
                + "]";
    }
}
