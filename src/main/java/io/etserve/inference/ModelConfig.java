package io.etserve.inference;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * A model's optional {@code config.yml}, beside its version directories:
 *
 * <pre>
 * method: forward            # the method to serve
 * inputs: [ { name: x } ]    # tensor names, in the method's input order; a dynamic input may
 *                            # say which dimensions vary: { name: x, dims: [-1, 16] }
 * outputs: [ { name: y } ]
 * instances: 2               # Modules per device it is placed on (or on the CPU)
 * max-elements-per-tensor: 1048576
 * devices: [0]               # GPU placement: a list, or "all" (default: etserve.cuda.placement)
 * placement: gpu             # cpu | gpu; default: gpu only when a method uses a GPU delegate
 * data-files: [weights.ptd]  # named-data files in the version directory (default: every *.ptd there)
 * warmup: 2                  # calls per instance before ready: a count (zeros), or
 *                            # { samples: 2, data: random }, or { samples: 2, file: warmup.json }
 *                            # (a protocol JSON request in the version directory)
 * sha256: 9f86d08...         # model.pte's digest, checked at load (or a model.pte.sha256 file)
 * max-planned-memory: 2GB    # planned working memory per instance (default etserve.inference.max-planned-memory)
 * dynamic-batching:          # join requests along dimension 0 (every input's first dimension dynamic)
 *   max-batch-size: 32       # rows per forward call
 *   max-queue-delay: 500us   # how long the first queued request waits for company
 *   preferred-batch-sizes: [8, 16, 32]   # optional
 * </pre>
 */
public record ModelConfig(String method, List<String> inputNames, List<String> outputNames,
        Optional<Integer> instances, Optional<Long> maxElementsPerTensor, Optional<List<Integer>> devices,
        Optional<Placement> placement, Warmup warmup, Optional<List<String>> dataFiles, Optional<String> sha256,
        Optional<Long> maxPlannedMemory, Map<String, List<Long>> inputDims, Optional<DynamicBatching> dynamicBatching) {

    /** Where a model runs when its config.yml says so; otherwise its delegates decide. */
    public enum Placement {
        /** CPU instances, no stream, no guard: refused for programs that need a GPU delegate. */
        CPU,
        /** Leased stream + caller-stream guard on every call, wherever the node has CUDA devices. */
        GPU
    }

    public ModelConfig(String method, List<String> inputNames, List<String> outputNames, Optional<Integer> instances,
            Optional<Long> maxElementsPerTensor, Optional<List<Integer>> devices) {
        this(method, inputNames, outputNames, instances, maxElementsPerTensor, devices, Optional.empty(), Warmup.NONE,
                Optional.empty(), Optional.empty(), Optional.empty(), Map.of(), Optional.empty());
    }

    public static final String FILE_NAME = "config.yml";
    /** {@code devices: all}. */
    public static final List<Integer> ALL_DEVICES = List.of(-1);
    private static final int MAX_CONFIG_BYTES = 64 * 1024;

    public ModelConfig {
        inputNames = List.copyOf(inputNames);
        outputNames = List.copyOf(outputNames);
        inputDims = Map.copyOf(inputDims);
    }

    public static ModelConfig defaults() {
        return new ModelConfig("forward", List.of(), List.of(), Optional.empty(), Optional.empty(), Optional.empty());
    }

    /** Reads {@code dir/config.yml}, or the defaults when there is none. */
    public static ModelConfig read(Path modelDir) throws InvalidModelConfigException {
        Path file = modelDir.resolve(FILE_NAME);
        if (!Files.isRegularFile(file)) {
            return defaults();
        }
        try (InputStream in = Files.newInputStream(file)) {
            byte[] bytes = in.readNBytes(MAX_CONFIG_BYTES + 1);
            if (bytes.length > MAX_CONFIG_BYTES) {
                throw new InvalidModelConfigException(file + " is larger than 64 KiB");
            }
            LoaderOptions options = new LoaderOptions();
            options.setAllowDuplicateKeys(false);
            options.setMaxAliasesForCollections(10);
            Object doc = new Yaml(new SafeConstructor(options)).load(new String(bytes, java.nio.charset.StandardCharsets.UTF_8));
            return parse(file, doc);
        } catch (IOException e) {
            throw new InvalidModelConfigException("cannot read " + file + ": " + e.getMessage());
        } catch (RuntimeException e) {
            if (e instanceof InvalidModelConfigException ice) {
                throw ice;
            }
            throw new InvalidModelConfigException("invalid YAML in " + file + ": " + e.getMessage());
        }
    }

    private static ModelConfig parse(Path file, Object doc) {
        if (doc == null) {
            return defaults();
        }
        if (!(doc instanceof Map<?, ?> map)) {
            throw new InvalidModelConfigException(file + " must be a YAML mapping");
        }
        for (Object key : map.keySet()) {
            if (!List.of("method", "inputs", "outputs", "instances", "max-elements-per-tensor", "devices",
                    "placement", "warmup", "data-files", "sha256", "max-planned-memory", "dynamic-batching").contains(key)) {
                throw new InvalidModelConfigException(file + ": unknown key '" + key + "'");
            }
        }
        String method = map.containsKey("method") ? string(file, "method", map.get("method")) : "forward";
        Optional<Integer> instances = Optional.ofNullable(map.get("instances")).map(v -> positiveInt(file, "instances", v));
        Optional<Long> maxElements = Optional.ofNullable(map.get("max-elements-per-tensor"))
                .map(v -> (long) positiveInt(file, "max-elements-per-tensor", v));
        return new ModelConfig(method, names(file, "inputs", map.get("inputs")),
                names(file, "outputs", map.get("outputs")), instances, maxElements, devices(file, map.get("devices")),
                placement(file, map.get("placement")), warmup(file, map.get("warmup")),
                dataFiles(file, map.get("data-files")), sha256(file, map.get("sha256")),
                byteSize(file, "max-planned-memory", map.get("max-planned-memory")),
                dims(file, map.get("inputs")), dynamicBatching(file, map.get("dynamic-batching")));
    }

    private static Optional<DynamicBatching> dynamicBatching(Path file, Object v) {
        if (v == null) {
            return Optional.empty();
        }
        if (!(v instanceof Map<?, ?> m) || !m.keySet().stream().allMatch(k -> List.of("max-batch-size",
                "max-queue-delay", "preferred-batch-sizes").contains(k))) {
            throw new InvalidModelConfigException(file + ": 'dynamic-batching' must be a mapping of max-batch-size, "
                    + "max-queue-delay and preferred-batch-sizes");
        }
        if (!m.containsKey("max-batch-size")) {
            throw new InvalidModelConfigException(file + ": 'dynamic-batching' needs max-batch-size");
        }
        int max = positiveInt(file, "dynamic-batching.max-batch-size", m.get("max-batch-size"));
        java.time.Duration delay = java.time.Duration.ZERO;
        if (m.containsKey("max-queue-delay")) {
            Object d = m.get("max-queue-delay");
            try {
                // 500us, 2ms or 0: a bare number other than 0 has no obvious unit (Triton's is
                // microseconds, Spring's milliseconds), so it is refused.
                if (d instanceof Integer i && i != 0 || !(d instanceof Integer || d instanceof String)) {
                    throw new IllegalArgumentException("no unit");
                }
                delay = d instanceof Integer ? java.time.Duration.ZERO
                        : org.springframework.boot.convert.DurationStyle.SIMPLE.parse(String.valueOf(d).strip());
            } catch (IllegalArgumentException e) {
                throw new InvalidModelConfigException(file + ": 'dynamic-batching.max-queue-delay' must be a duration "
                        + "with its unit, such as 500us or 2ms, got '" + d + "'");
            }
        }
        List<Integer> preferred = new ArrayList<>();
        if (m.get("preferred-batch-sizes") instanceof List<?> list) {
            for (Object size : list) {
                preferred.add(positiveInt(file, "dynamic-batching.preferred-batch-sizes[]", size));
            }
        } else if (m.containsKey("preferred-batch-sizes")) {
            throw new InvalidModelConfigException(file + ": 'dynamic-batching.preferred-batch-sizes' must be a list");
        }
        try {
            return Optional.of(new DynamicBatching(max, delay, preferred));
        } catch (IllegalArgumentException e) {
            throw new InvalidModelConfigException(file + ": dynamic-batching: " + e.getMessage());
        }
    }

    /**
     * {@code inputs: [{name: x, dims: [-1, 16]}]}: which dimensions of a dynamic input may vary
     * (-1) and which are fixed, where the program only says the whole tensor is dynamic.
     */
    private static Map<String, List<Long>> dims(Path file, Object inputs) {
        Map<String, List<Long>> out = new java.util.LinkedHashMap<>();
        if (!(inputs instanceof List<?> list)) {
            return out;
        }
        for (Object item : list) {
            if (!(item instanceof Map<?, ?> m) || !m.containsKey("dims")) {
                continue;
            }
            String name = string(file, "inputs[].name", m.get("name"));
            if (!(m.get("dims") instanceof List<?> dims) || dims.isEmpty() || dims.size() > 16) {
                throw new InvalidModelConfigException(file + ": 'dims' of input '" + name
                        + "' must be a list of sizes, -1 for a dimension that varies");
            }
            List<Long> sizes = new ArrayList<>();
            for (Object d : dims) {
                if (!(d instanceof Integer || d instanceof Long) || ((Number) d).longValue() < -1
                        || ((Number) d).longValue() == 0) {
                    throw new InvalidModelConfigException(file + ": 'dims' of input '" + name + "' holds '" + d
                            + "'; each entry is -1 or a positive size");
                }
                sizes.add(((Number) d).longValue());
            }
            out.put(name, List.copyOf(sizes));
        }
        return out;
    }

    private static Optional<String> sha256(Path file, Object v) {
        if (v == null) {
            return Optional.empty();
        }
        return ProgramIntegrity.parse(String.valueOf(v)).or(() -> {
            throw new InvalidModelConfigException(file + ": 'sha256' must be 64 hex digits (sha256sum model.pte)");
        });
    }

    /** Bytes as a number or with a unit ({@code 512MB}, {@code 2GB}). */
    private static Optional<Long> byteSize(Path file, String key, Object v) {
        if (v == null) {
            return Optional.empty();
        }
        try {
            long bytes = v instanceof Number n ? n.longValue()
                    : org.springframework.util.unit.DataSize.parse(String.valueOf(v).strip()).toBytes();
            if (bytes <= 0) {
                throw new IllegalArgumentException("not positive");
            }
            return Optional.of(bytes);
        } catch (IllegalArgumentException e) {
            throw new InvalidModelConfigException(file + ": '" + key + "' must be a positive size such as 512MB");
        }
    }

    /** File names inside the version directory: no paths, so a config cannot reach outside it. */
    private static Optional<List<String>> dataFiles(Path file, Object v) {
        if (v == null) {
            return Optional.empty();
        }
        if (!(v instanceof List<?> list) || list.size() > 64) {
            throw new InvalidModelConfigException(file + ": 'data-files' must be a list of file names");
        }
        List<String> names = new ArrayList<>();
        for (Object item : list) {
            String n = plainFileName(file, "data-files[]", "data file", item);
            if (names.contains(n)) {
                throw new InvalidModelConfigException(file + ": data file '" + n + "' is listed twice");
            }
            names.add(n);
        }
        return Optional.of(List.copyOf(names));
    }

    /** A file name inside the version directory: no path, so a config cannot reach outside it. */
    private static String plainFileName(Path file, String key, String what, Object v) {
        String n = string(file, key, v);
        if (n.contains("/") || n.contains("\\") || n.equals(".") || n.equals("..") || n.chars().anyMatch(c -> c < 0x20)) {
            throw new InvalidModelConfigException(file + ": " + what + " '" + ModelRegistry.abbreviate(n)
                    + "' must be a plain file name in the version directory");
        }
        return n;
    }

    private static Optional<Placement> placement(Path file, Object v) {
        if (v == null) {
            return Optional.empty();
        }
        if ("cpu".equals(v)) {
            return Optional.of(Placement.CPU);
        }
        if ("gpu".equals(v)) {
            return Optional.of(Placement.GPU);
        }
        throw new InvalidModelConfigException(file + ": 'placement' must be cpu or gpu");
    }

    private static Warmup warmup(Path file, Object v) {
        if (v == null) {
            return Warmup.NONE;
        }
        if (v instanceof Integer) {
            return new Warmup(boundedCount(file, v), Warmup.Data.ZEROS);
        }
        if (v instanceof Map<?, ?> m && m.keySet().stream().allMatch(k -> k.equals("samples") || k.equals("data")
                || k.equals("file"))) {
            Object data = m.containsKey("data") ? m.get("data") : m.containsKey("file") ? "file" : "zeros";
            if ("file".equals(data)) {
                String name = plainFileName(file, "warmup.file", "warm-up file", m.get("file"));
                return new Warmup(boundedCount(file, m.containsKey("samples") ? m.get("samples") : 1),
                        Warmup.Data.FILE, name);
            }
            if ("zeros".equals(data) || "random".equals(data)) {
                return new Warmup(boundedCount(file, m.containsKey("samples") ? m.get("samples") : 1),
                        "zeros".equals(data) ? Warmup.Data.ZEROS : Warmup.Data.RANDOM);
            }
        }
        throw new InvalidModelConfigException(file + ": 'warmup' must be a sample count, "
                + "{ samples: N, data: zeros|random } or { samples: N, file: warmup.json }");
    }

    private static int boundedCount(Path file, Object v) {
        if (!(v instanceof Integer i) || i < 0 || i > 100) {
            throw new InvalidModelConfigException(file + ": 'warmup' samples must be 0..100");
        }
        return i;
    }

    private static Optional<List<Integer>> devices(Path file, Object v) {
        if (v == null) {
            return Optional.empty();
        }
        if ("all".equals(v)) {
            return Optional.of(ALL_DEVICES);
        }
        if (v instanceof List<?> list && !list.isEmpty()
                && list.stream().allMatch(d -> d instanceof Integer i && i >= 0 && i < 1024)) {
            return Optional.of(list.stream().map(d -> (Integer) d).toList());
        }
        throw new InvalidModelConfigException(file + ": 'devices' must be 'all' or a list of device ordinals");
    }

    private static List<String> names(Path file, String key, Object value) {
        if (value == null) {
            return List.of();
        }
        if (!(value instanceof List<?> list)) {
            throw new InvalidModelConfigException(file + ": '" + key + "' must be a list");
        }
        List<String> names = new ArrayList<>();
        for (Object item : list) {
            Object name = item instanceof Map<?, ?> m ? m.get("name") : item;
            String n = string(file, key + "[].name", name);
            if (names.contains(n)) {
                throw new InvalidModelConfigException(file + ": duplicate name '" + n + "' in " + key);
            }
            names.add(n);
        }
        return names;
    }

    private static String string(Path file, String key, Object v) {
        if (!(v instanceof String s) || s.isBlank() || s.length() > 256) {
            throw new InvalidModelConfigException(file + ": '" + key + "' must be a non-empty string");
        }
        return s;
    }

    private static int positiveInt(Path file, String key, Object v) {
        if (!(v instanceof Integer i) || i < 1) {
            throw new InvalidModelConfigException(file + ": '" + key + "' must be a positive integer");
        }
        return i;
    }

    /** The config file is malformed: the model fails to load with this message. */
    public static class InvalidModelConfigException extends RuntimeException {
        public InvalidModelConfigException(String message) {
            super(message);
        }
    }
}
