package io.etserve.modelconfig;

import io.etserve.inference.UntrustedText;
import io.etserve.modelconfig.ModelConfig.InvalidModelConfigException;
import io.etserve.modelconfig.ModelConfig.Placement;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.bind.BindHandler;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.UnboundConfigurationPropertiesException;
import org.springframework.boot.context.properties.bind.handler.NoUnboundElementsBindHandler;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;
import org.springframework.boot.convert.ApplicationConversionService;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.util.unit.DataSize;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.Mark;
import org.yaml.snakeyaml.error.MarkedYAMLException;
import org.yaml.snakeyaml.reader.ReaderException;

/**
 * Reads a model's {@code config.yml} (documented on {@link ModelConfig}) in three steps:
 * <ol>
 *   <li>SnakeYAML's safe loader, with the file size, aliases and duplicate keys bounded;
 *   <li>Spring's {@link Binder} over the flattened document into {@link Document}: the same
 *       conversions as {@code application.yml} (sizes such as {@code 512MB}, {@code cpu|gpu}),
 *       and every key the file holds must bind (a typo is refused, not ignored);
 *   <li>the rules Spring cannot express (ranges, plain file names, digests), into {@link ModelConfig}.
 * </ol>
 * Shorthands are expanded before binding: {@code inputs: [x]} for {@code [{name: x}]},
 * {@code warmup: 2} for {@code {samples: 2}}, {@code devices: all}.
 */
public final class ModelConfigFile {

    private static final Pattern HEX64 = Pattern.compile("[0-9a-fA-F]{64}");

    private static final int MAX_CONFIG_BYTES = 64 * 1024;
    /** Deepest nesting a config.yml may have (its deepest value, in inputs[].dims[], is four down). */
    private static final int MAX_DEPTH = 8;
    /** Most instances a config.yml may ask for (per GPU, or in all on the CPU), as a Triton override's count. */
    private static final int MAX_INSTANCES = 1024;
    private static final String ROOT = "model";
    private static final Pattern KEY = Pattern.compile("[A-Za-z0-9][A-Za-z0-9-]{0,63}");

    /** config.yml's shape, as the Binder fills it (kebab-case keys in the file). */
    record Document(String method, List<TensorEntry> inputs, List<TensorEntry> outputs, Integer instances,
            Integer maxElementsPerTensor, List<String> devices, Placement placement, WarmupEntry warmup,
            List<String> dataFiles, String sha256, DataSize maxPlannedMemory, BatchingEntry dynamicBatching,
            PolicyEntry versionPolicy, Boolean cpuThreadpool) {
    }

    record PolicyEntry(Boolean all, Integer latest, List<Long> specific) {
    }

    record TensorEntry(String name, List<Long> dims) {
    }

    record WarmupEntry(Integer samples, String data, String file) {
    }

    record BatchingEntry(Integer maxBatchSize, String maxQueueDelay, List<Integer> preferredBatchSizes) {
    }

    /** What a key must hold: the message when its value does not bind, or is out of range. */
    private static final Map<String, String> EXPECTED = Map.ofEntries(
            Map.entry("method", "must be a non-empty string"),
            Map.entry("instances", "must be a positive integer"),
            Map.entry("max-elements-per-tensor", "must be a positive integer"),
            Map.entry("devices", "must be 'all' or a list of device ordinals"),
            Map.entry("placement", "must be cpu or gpu"),
            Map.entry("max-planned-memory", "must be a positive size such as 512MB"),
            Map.entry("cpu-threadpool", "must be true or false"),
            Map.entry("inputs.dims", "must be a list of sizes, -1 for a dimension that varies ('dims')"),
            Map.entry("warmup.samples", "must be 0..100 ('warmup' samples)"),
            Map.entry("version-policy.latest", "must be a positive integer"),
            Map.entry("version-policy.specific", "must be a list of version numbers"),
            Map.entry("dynamic-batching.max-batch-size", "must be a positive integer"),
            Map.entry("dynamic-batching.preferred-batch-sizes", "must be a list of positive integers"));

    private final Path file;

    private ModelConfigFile(Path file) {
        this.file = file;
    }

    /** Reads {@code dir/config.yml}, or the defaults when there is none. */
    static ModelConfig read(Path modelDir) {
        Path file = modelDir.resolve(ModelConfig.FILE_NAME);
        if (!Files.isRegularFile(file)) {
            return ModelConfig.defaults();
        }
        ModelConfigFile reader = new ModelConfigFile(file);
        Object doc = reader.load();
        if (doc == null) {
            return ModelConfig.defaults();
        }
        if (!(doc instanceof Map<?, ?> map)) {
            throw reader.invalid("must be a YAML mapping");
        }
        return reader.toConfig(reader.bind(reader.expandShorthands(map)), map);
    }

    private Object load() {
        try (InputStream in = Files.newInputStream(file)) {
            byte[] bytes = in.readNBytes(MAX_CONFIG_BYTES + 1);
            if (bytes.length > MAX_CONFIG_BYTES) {
                throw new InvalidModelConfigException(file + " is larger than 64 KiB");
            }
            LoaderOptions options = new LoaderOptions();
            options.setAllowDuplicateKeys(false);
            options.setMaxAliasesForCollections(10);
            Object doc = new Yaml(new SafeConstructor(options)).load(new String(bytes, StandardCharsets.UTF_8));
            requireShallow(doc, 0);
            return doc;
        } catch (IOException e) {
            throw new InvalidModelConfigException("cannot read " + file + ": " + e.getMessage());
        } catch (InvalidModelConfigException e) {
            throw e;
        } catch (MarkedYAMLException e) {
            throw new InvalidModelConfigException("invalid YAML in " + file + ": " + withoutSnippet(e));
        } catch (ReaderException e) {
            // Its message says only "special characters are not allowed": say which and where.
            throw new InvalidModelConfigException("invalid YAML in " + file + ": a character YAML does not allow ("
                    + String.format(Locale.ROOT, "U+%04X", e.getCodePoint()) + ") at character "
                    + (e.getPosition() + 1));
        } catch (RuntimeException e) {
            throw new InvalidModelConfigException("invalid YAML in " + file + ": " + e.getMessage());
        }
    }

    /**
     * What SnakeYAML found and where, without the lines of the file it quotes: a config.yml linked
     * to another file would show them to whoever reads the load's reason, and a reason is one line.
     */
    static String withoutSnippet(MarkedYAMLException e) {
        StringBuilder b = new StringBuilder();
        if (e.getContext() != null) {
            b.append(e.getContext()).append(e.getContextMark() == null ? "" : " at " + where(e.getContextMark()))
                    .append(": ");
        }
        b.append(e.getProblem() == null ? "not YAML" : e.getProblem());
        if (e.getProblemMark() != null) {
            b.append(" at ").append(where(e.getProblemMark()));
        }
        return b.toString();
    }

    private static String where(Mark mark) {
        return "line " + (mark.getLine() + 1) + ", column " + (mark.getColumn() + 1);
    }

    /**
     * Refuses a document nested deeper than {@link #MAX_DEPTH}: none of this file's keys needs
     * more, and an alias that contains itself ({@code a: &x [*x]}) would make every walk of the
     * document below recurse until the stack overflows.
     */
    private void requireShallow(Object value, int depth) {
        if (depth > MAX_DEPTH) {
            throw invalid("nests deeper than " + MAX_DEPTH + " levels (an alias that contains itself?)");
        }
        if (value instanceof Map<?, ?> map) {
            for (Object v : map.values()) {
                requireShallow(v, depth + 1);
            }
        } else if (value instanceof List<?> list) {
            for (Object v : list) {
                requireShallow(v, depth + 1);
            }
        }
    }

    // --- step 1: shorthands and shapes the Binder would only half-understand -----------------

    private Map<String, Object> expandShorthands(Map<?, ?> doc) {
        Map<String, Object> out = new LinkedHashMap<>();
        doc.forEach((k, v) -> out.put(String.valueOf(k), v));
        for (String key : List.of("inputs", "outputs")) {
            Object v = out.get(key);
            if (v == null) {
                continue;
            }
            if (!(v instanceof List<?> list)) {
                throw invalid("'" + key + "' must be a list");
            }
            out.put(key, list.stream().map(item -> item instanceof Map<?, ?> ? item : mapOf("name", item)).toList());
        }
        if (out.get("warmup") instanceof Integer samples) {
            out.put("warmup", mapOf("samples", samples));
        } else if (out.containsKey("warmup") && !(out.get("warmup") instanceof Map<?, ?>)) {
            throw invalid("'warmup' must be a sample count, { samples: N, data: zeros|random } or "
                    + "{ samples: N, file: warmup.json }");
        }
        Object batching = out.get("dynamic-batching");
        if (batching != null && !(batching instanceof Map<?, ?>)) {
            throw invalid("'dynamic-batching' must be a mapping of max-batch-size, max-queue-delay and "
                    + "preferred-batch-sizes");
        }
        if (batching instanceof Map<?, ?> b && b.get("preferred-batch-sizes") != null
                && !(b.get("preferred-batch-sizes") instanceof List<?>)) {
            throw invalid("'dynamic-batching.preferred-batch-sizes' must be a list");
        }
        if (out.get("data-files") != null && !(out.get("data-files") instanceof List<?>)) {
            throw invalid("'data-files' must be a list of file names");
        }
        Object policy = out.get("version-policy");
        if ("all".equals(policy)) {
            out.put("version-policy", mapOf("all", true));
        } else if (policy != null && !(policy instanceof Map<?, ?> p && p.size() == 1
                && (p.containsKey("latest") || p.containsKey("specific")))) {
            throw invalid("'version-policy' must be all, { latest: N } or { specific: [1, 3] }");
        }
        Object devices = out.get("devices");
        if (devices != null && !"all".equals(devices) && !(devices instanceof List<?>)) {
            throw invalid("'devices' " + EXPECTED.get("devices"));
        }
        return out;
    }

    private static Map<String, Object> mapOf(String key, Object value) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(key, value);
        return m;
    }

    // --- step 2: Spring's Binder ----------------------------------------------------------------

    private Document bind(Map<String, Object> doc) {
        Map<String, Object> flat = new LinkedHashMap<>();
        flatten(ROOT, doc, flat);
        Binder binder = new Binder(List.of(new MapConfigurationPropertySource(flat)), null,
                ApplicationConversionService.getSharedInstance());
        try {
            return binder.bindOrCreate(ROOT, Bindable.of(Document.class),
                    new NoUnboundElementsBindHandler(BindHandler.DEFAULT));
        } catch (BindException e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof UnboundConfigurationPropertiesException unbound) {
                    String name = unbound.getUnboundProperties().stream().map(ConfigurationProperty::getName)
                            .map(Object::toString).sorted().findFirst().orElse("?");
                    throw invalid(whyUnbound(key(name)));
                }
            }
            String key = key(e.getName().toString());
            Object value = e.getProperty() == null ? null : e.getProperty().getValue();
            String expected = EXPECTED.getOrDefault(key.replaceAll("\\[[0-9]+]", ""), "has an invalid value");
            throw invalid("'" + key + "' " + expected + ", got '" + UntrustedText.abbreviate(String.valueOf(value)) + "'");
        }
    }

    /**
     * Every path of {@link Document} ({@code []} for a list's items), true where one value goes:
     * what tells a misspelt key from a value written as a list or mapping where one goes.
     */
    private static final Map<String, Boolean> PATHS = paths("", Document.class, new HashMap<>());
    /** A property name's segments: its first key, then {@code .key} or {@code [index]}. */
    private static final Pattern SEGMENT = Pattern.compile("\\.?([^.\\[]+)|\\[[0-9]+]");

    private static Map<String, Boolean> paths(String path, Type type, Map<String, Boolean> out) {
        if (type instanceof ParameterizedType list && list.getRawType() == List.class) {
            out.put(path, false);
            paths(path + "[]", list.getActualTypeArguments()[0], out);
        } else if (type instanceof Class<?> record && record.isRecord()) {
            out.put(path, false);
            for (RecordComponent c : record.getRecordComponents()) {
                String kebab = c.getName().replaceAll("([A-Z])", "-$1").toLowerCase(Locale.ROOT);
                paths(path.isEmpty() ? kebab : path + "." + kebab, c.getGenericType(), out);
            }
        } else {
            out.put(path, true);
        }
        return out;
    }

    /**
     * Why {@code name} did not bind: the first of its keys config.yml does not have ("unknown key
     * 'instance'"), or a list or mapping written where one value goes ({@code sha256: [ab..]}
     * binds as {@code sha256[0]}, which is no key either).
     */
    private static String whyUnbound(String name) {
        StringBuilder shown = new StringBuilder();
        StringBuilder path = new StringBuilder();
        Matcher m = SEGMENT.matcher(name);
        while (m.lookingAt()) {
            if (Boolean.TRUE.equals(PATHS.get(path.toString()))) {
                // A list's item does not get its list's words ("must be a list of ...").
                String expected = path.toString().endsWith("[]") ? null
                        : EXPECTED.get(path.toString().replace("[]", ""));
                return "'" + UntrustedText.abbreviate(shown.toString()) + "' takes one value, not a list or mapping"
                        + (expected == null ? "" : ": it " + expected);
            }
            shown.append(m.group());
            path.append(m.group(1) == null ? "[]" : m.group());
            if (!PATHS.containsKey(path.toString())) {
                return "unknown key '" + UntrustedText.abbreviate(shown.toString()) + "'";
            }
            m.region(m.end(), name.length());
        }
        return "unknown key '" + UntrustedText.abbreviate(name) + "'";
    }

    /** {@code a: {b: [x, y]}} becomes {@code a.b[0]=x, a.b[1]=y}; an empty list or map binds as empty. */
    private void flatten(String prefix, Object value, Map<String, Object> out) {
        if (value instanceof Map<?, ?> map) {
            if (map.isEmpty()) {
                out.put(prefix, "");
            }
            map.forEach((k, v) -> {
                String key = String.valueOf(k);
                if (!KEY.matcher(key).matches()) {
                    throw invalid("unknown key '" + UntrustedText.abbreviate(key) + "'");
                }
                flatten(prefix + "." + key, v, out);
            });
        } else if (value instanceof List<?> list) {
            if (list.isEmpty()) {
                out.put(prefix, "");
            }
            for (int i = 0; i < list.size(); i++) {
                if (list.get(i) == null) {
                    // dims: [1, ~] would bind as [1]: a list item is never optional.
                    throw invalid("'" + UntrustedText.abbreviate(key(prefix)) + "[" + i + "]' is empty");
                }
                flatten(prefix + "[" + i + "]", list.get(i), out);
            }
        } else if (value != null) {
            out.put(prefix, value);
        }
    }

    private static String key(String propertyName) {
        return propertyName.startsWith(ROOT + ".") ? propertyName.substring(ROOT.length() + 1) : propertyName;
    }

    // --- step 3: the rules ------------------------------------------------------------------

    private ModelConfig toConfig(Document y, Map<?, ?> raw) {
        return new ModelConfig(y.method() == null ? "forward" : string("method", y.method()),
                names("inputs", y.inputs()), names("outputs", y.outputs()),
                Optional.ofNullable(y.instances()).map(v -> atMost("instances", positive("instances", v), MAX_INSTANCES)),
                Optional.ofNullable(y.maxElementsPerTensor()).map(v -> (long) positive("max-elements-per-tensor", v)),
                devices(y.devices()), Optional.ofNullable(y.placement()), warmup(y.warmup()), dataFiles(y.dataFiles()),
                sha256(y.sha256()), plannedMemory(y.maxPlannedMemory()), dims(y.inputs()),
                batching(y.dynamicBatching(), raw.get("dynamic-batching")), versionPolicy(y.versionPolicy()),
                y.cpuThreadpool() == null || y.cpuThreadpool());
    }

    private VersionPolicy versionPolicy(PolicyEntry p) {
        if (p == null || Boolean.TRUE.equals(p.all())) {
            return VersionPolicy.ALL;
        }
        try {
            return p.latest() != null ? VersionPolicy.latest(p.latest()) : VersionPolicy.specific(p.specific());
        } catch (IllegalArgumentException | NullPointerException e) {
            throw invalid("'version-policy' must be all, { latest: N } (N >= 1) or { specific: [1, 3] }");
        }
    }

    private List<String> names(String key, List<TensorEntry> entries) {
        List<String> names = new ArrayList<>();
        for (TensorEntry e : entries == null ? List.<TensorEntry>of() : entries) {
            String n = string(key + "[].name", e.name());
            if (names.contains(n)) {
                throw invalid("duplicate name '" + UntrustedText.abbreviate(n) + "' in " + key);
            }
            names.add(n);
        }
        return names;
    }

    /** {@code inputs: [{name: x, dims: [-1, 16]}]}: which dimensions of a dynamic input vary (-1). */
    private Map<String, List<Long>> dims(List<TensorEntry> inputs) {
        Map<String, List<Long>> out = new LinkedHashMap<>();
        for (TensorEntry e : inputs == null ? List.<TensorEntry>of() : inputs) {
            if (e.dims() == null) {
                continue;
            }
            if (e.dims().isEmpty() || e.dims().size() > 16
                    || e.dims().stream().anyMatch(d -> d == null || d < -1 || d == 0)) {
                throw invalid("'dims' of input '" + UntrustedText.abbreviate(e.name()) + "' must be a list of sizes, "
                        + "each -1 (varies) or a positive size, got " + e.dims());
            }
            out.put(e.name(), List.copyOf(e.dims()));
        }
        return out;
    }

    private Optional<List<Integer>> devices(List<String> devices) {
        if (devices == null) {
            return Optional.empty();
        }
        if (devices.equals(List.of("all"))) {
            return Optional.of(ModelConfig.ALL_DEVICES);
        }
        try {
            List<Integer> ordinals = devices.stream().map(String::strip).map(Integer::valueOf).toList();
            if (!ordinals.isEmpty() && ordinals.stream().allMatch(d -> d >= 0 && d < 1024)) {
                return Optional.of(ordinals);
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw invalid("'devices' " + EXPECTED.get("devices"));
    }

    private Warmup warmup(WarmupEntry w) {
        if (w == null) {
            return Warmup.NONE;
        }
        int samples = w.samples() == null ? 1 : w.samples();
        if (samples < 0 || samples > 100) {
            throw invalid("'warmup' samples must be 0..100");
        }
        if (w.file() != null && (w.data() == null || "file".equals(w.data()))) {
            return new Warmup(samples, Warmup.Data.FILE, plainFileName("warm-up file", w.file()));
        }
        if (w.file() == null && (w.data() == null || "zeros".equals(w.data()) || "random".equals(w.data()))) {
            return new Warmup(samples, "random".equals(w.data()) ? Warmup.Data.RANDOM : Warmup.Data.ZEROS);
        }
        throw invalid("'warmup' must be a sample count, { samples: N, data: zeros|random } or "
                + "{ samples: N, file: warmup.json }");
    }

    /** File names inside the version directory: no paths, so a config cannot reach outside it. */
    private Optional<List<String>> dataFiles(List<String> files) {
        if (files == null) {
            return Optional.empty();
        }
        if (files.size() > 64) {
            throw invalid("'data-files' must be a list of at most 64 file names");
        }
        List<String> names = new ArrayList<>();
        for (String f : files) {
            String n = plainFileName("data file", f);
            if (names.contains(n)) {
                throw invalid("data file '" + n + "' is listed twice");
            }
            names.add(n);
        }
        return Optional.of(List.copyOf(names));
    }

    private String plainFileName(String what, String name) {
        String n = string(what, name);
        if (n.contains("/") || n.contains("\\") || n.equals(".") || n.equals("..") || n.chars().anyMatch(c -> c < 0x20)) {
            throw invalid(what + " '" + UntrustedText.abbreviate(n) + "' must be a plain file name in the version directory");
        }
        return n;
    }

    /** A sha256 digest as config.yml or a sidecar file writes it: 64 hex digits, returned in lower case. */
    public static Optional<String> sha256Digest(String value) {
        return HEX64.matcher(value).matches() ? Optional.of(value.toLowerCase(Locale.ROOT)) : Optional.empty();
    }

    private Optional<String> sha256(String v) {
        if (v == null) {
            return Optional.empty();
        }
        return Optional.of(sha256Digest(v).orElseThrow(
                () -> invalid("'sha256' must be 64 hex digits (sha256sum model.pte)")));
    }

    private Optional<Long> plannedMemory(DataSize size) {
        if (size == null) {
            return Optional.empty();
        }
        if (size.toBytes() <= 0) {
            throw invalid("'max-planned-memory' " + EXPECTED.get("max-planned-memory"));
        }
        return Optional.of(size.toBytes());
    }

    private Optional<DynamicBatching> batching(BatchingEntry b, Object raw) {
        if (b == null) {
            return Optional.empty();
        }
        Duration delay = queueDelay(((Map<?, ?>) raw).get("max-queue-delay"));
        try {
            return Optional.of(DynamicBatching.of(b.maxBatchSize(), delay, b.preferredBatchSizes(),
                    DynamicBatching.Names.CONFIG_YML));
        } catch (IllegalArgumentException e) {
            throw invalid(e.getMessage());
        }
    }

    /**
     * 500us, 2ms or 0. Read from the YAML value, not the bound string: a bare number other than 0
     * has no obvious unit (Triton's is microseconds, Spring's milliseconds), so it is refused.
     */
    private Duration queueDelay(Object v) {
        if (v == null || Integer.valueOf(0).equals(v)) {
            return Duration.ZERO;
        }
        try {
            if (!(v instanceof String s)) {
                throw new IllegalArgumentException("no unit");
            }
            return DurationStyle.SIMPLE.parse(s.strip());
        } catch (IllegalArgumentException e) {
            throw invalid("'dynamic-batching.max-queue-delay' must be a duration with its unit, such as 500us or 2ms, "
                    + "got '" + UntrustedText.abbreviate(String.valueOf(v)) + "'");
        }
    }

    private String string(String key, String v) {
        if (v == null || v.isBlank() || v.length() > 256) {
            throw invalid("'" + key + "' must be a non-empty string");
        }
        return v;
    }

    /** {@code v}, refused past {@code max}. */
    private int atMost(String key, int v, int max) {
        if (v > max) {
            throw invalid("'" + key + "' must be at most " + max + ", got " + v);
        }
        return v;
    }

    private int positive(String key, int v) {
        if (v < 1) {
            throw invalid("'" + key + "' must be a positive integer");
        }
        return v;
    }

    private InvalidModelConfigException invalid(String what) {
        return new InvalidModelConfigException(file + ": " + what);
    }
}
