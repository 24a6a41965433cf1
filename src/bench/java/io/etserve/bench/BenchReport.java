package io.etserve.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The summary table of {@code bench/run-cpu.sh}: JMH's JSON result for
 * {@link BridgeExecuteBenchmark} next to the {@link LoadGenerator} JSON lines, with the REST
 * overhead (REST p50 minus in-process p50) and the throughput ratio for each model and
 * concurrency (JMH threads = load-generator connections).
 *
 * <p>{@code java -cp <test classpath> io.etserve.bench.BenchReport jmh.json rest.jsonl}
 */
public final class BenchReport {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    /** In-process numbers for one model and thread count, in microseconds and calls per second. */
    record InProcess(double p50Us, double p99Us, double opsPerSecond) {}

    private BenchReport() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: BenchReport <jmh.json> <rest.jsonl>");
            System.exit(64);
        }
        Map<String, InProcess> inProcess = readJmh(Path.of(args[0]));
        List<JsonNode> rest = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(args[1]), StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                rest.add(JSON.readTree(line));
            }
        }
        System.out.print(table(inProcess, rest));
    }

    static Map<String, InProcess> readJmh(Path file) {
        Map<String, Double> p50 = new LinkedHashMap<>();
        Map<String, Double> p99 = new LinkedHashMap<>();
        Map<String, Double> ops = new LinkedHashMap<>();
        for (JsonNode run : JSON.readTree(file.toFile())) {
            String key = key(run.path("params").path("model").asString(), run.path("threads").asInt());
            JsonNode metric = run.path("primaryMetric");
            String unit = metric.path("scoreUnit").asString();
            switch (run.path("mode").asString()) {
                case "sample" -> {
                    requireUnit(unit, "us/op");
                    p50.put(key, metric.path("scorePercentiles").path("50.0").asDouble());
                    p99.put(key, metric.path("scorePercentiles").path("99.0").asDouble());
                }
                // JMH's throughput score sums all threads: calls per microsecond, whole benchmark.
                case "thrpt" -> {
                    requireUnit(unit, "ops/us");
                    ops.put(key, metric.path("score").asDouble() * 1e6);
                }
                default -> { }
            }
        }
        Map<String, InProcess> result = new LinkedHashMap<>();
        for (String key : p50.keySet()) {
            result.put(key, new InProcess(p50.get(key), p99.get(key), ops.getOrDefault(key, Double.NaN)));
        }
        return result;
    }

    static String table(Map<String, InProcess> inProcess, List<JsonNode> rest) {
        StringBuilder out = new StringBuilder();
        out.append("In-process (JMH, ProgramInstance.execute; SampleTime percentiles, Throughput summed over threads)\n\n");
        out.append("| model | threads | p50 µs | p99 µs | calls/s |\n|---|---|---|---|---|\n");
        inProcess.forEach((key, v) -> {
            String[] k = key.split("@");
            out.append(String.format(Locale.ROOT, "| %s | %s | %.2f | %.2f | %,.0f |%n", k[0], k[1], v.p50Us(),
                    v.p99Us(), v.opsPerSecond()));
        });
        out.append("\nREST (LoadGenerator, closed loop on 127.0.0.1; overhead = REST p50 − in-process p50,"
                + " ratio = in-process calls/s ÷ REST req/s)\n\n");
        out.append("| model | format | conc | requests | errors incl. warmup | req/s | p50 µs | p90 µs | p99 µs | max µs"
                + " | overhead p50 µs | thrpt ratio | client CPU µs/req | server CPU µs/req |\n");
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (JsonNode r : rest) {
            InProcess base = inProcess.get(key(r.path("model").asString(), r.path("concurrency").asInt()));
            double p50 = r.path("p50_us").asDouble();
            double rps = r.path("throughput_rps").asDouble();
            String overhead = base == null ? "n/a" : String.format(Locale.ROOT, "%.1f", p50 - base.p50Us());
            String ratio = base == null || rps == 0 ? "n/a"
                    : String.format(Locale.ROOT, "%.0f×", base.opsPerSecond() / rps);
            out.append(String.format(Locale.ROOT, "| %s | %s | %d | %d | %d | %,.0f | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s |%n",
                    r.path("model").asString(), r.path("format").asString()
                            + (r.path("pause_us").asLong() > 0 ? ", " + r.path("pause_us").asLong() + " µs pause" : ""),
                    r.path("concurrency").asInt(), r.path("requests").asLong(), r.path("errors").asLong() + r.path("warmup_errors").asLong(), rps, p50,
                    r.path("p90_us").asDouble(), r.path("p99_us").asDouble(), r.path("max_us").asDouble(), overhead,
                    ratio, r.path("client_cpu_us_per_request").asString("n/a"),
                    r.path("server_cpu_us_per_request").asString("n/a")));
        }
        return out.toString();
    }

    private static String key(String model, int concurrency) {
        return model + "@" + concurrency;
    }

    private static void requireUnit(String unit, String expected) {
        if (!unit.equals(expected)) {
            throw new IllegalStateException("JMH result in " + unit + ", this report expects " + expected);
        }
    }
}
