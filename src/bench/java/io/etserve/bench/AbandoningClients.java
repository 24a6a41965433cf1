package io.etserve.bench;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import tools.jackson.databind.json.JsonMapper;

/**
 * Clients that give up: each of {@code --clients} threads sends a request to the slow probe model
 * (x = [0, {@code --hold-ms}]: one forward call holds the instance that long) on its own
 * keep-alive connection and waits at most {@code --give-up-ms} for the answer; past that it
 * closes the connection and sends the request again on a new one, as a client with a timeout and
 * a retry does. A 503 is retried at once too. Optionally each request carries the protocol's
 * {@code timeout} parameter ({@code --timeout-us}).
 *
 * <p>Goodput is what reached a client that still waited: 200 answers within the give-up time,
 * per second. It is compared with the model's capacity (1000 / hold-ms calls per second per
 * instance) and with the forward calls the service ran meanwhile ({@code nv_inference_exec_count}
 * from the management port): calls that ran for nobody are wasted.
 *
 * <pre>
 * java -cp &lt;test classpath&gt; io.etserve.bench.AbandoningClients --url http://127.0.0.1:18080 \
 *     --management http://127.0.0.1:18081 --model slow --clients 64 --give-up-ms 100 --hold-ms 20 \
 *     --timeout-us 75000 --warmup 3 --duration 20 --label current
 * </pre>
 */
public final class AbandoningClients {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    record Options(int port, URI management, String model, int clients, int giveUpMillis, double holdMillis,
            long timeoutMicros, int instances, double warmupSeconds, double durationSeconds, String label,
            Path jsonOut) {}

    /** One client's tallies over the measured window; only its thread writes them. */
    private static final class Client {
        long delivered;
        long late;
        long gaveUp;
        long expired;
        long refused;
        long errors;
        long[] latencies = new long[1024];
        String firstError;

        void deliveredIn(long nanos) {
            if (delivered == latencies.length) {
                latencies = Arrays.copyOf(latencies, latencies.length * 2);
            }
            latencies[(int) delivered++] = nanos;
        }
    }

    private AbandoningClients() {}

    public static void main(String[] args) throws Exception {
        Options o = parse(args);
        Map<String, Object> result = run(o);
        String line = JSON.writeValueAsString(result);
        System.out.println(line);
        if (o.jsonOut() != null) {
            Files.writeString(o.jsonOut(), line + "\n", StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND);
        }
    }

    static Map<String, Object> run(Options o) throws Exception {
        String parameters = o.timeoutMicros() > 0 ? "\"parameters\":{\"timeout\":" + o.timeoutMicros() + "}," : "";
        String body = "{" + parameters + "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[0,"
                + o.holdMillis() + "]}]}";
        byte[] bodyBytes = body.getBytes(StandardCharsets.UTF_8);
        byte[] request = LoopbackHttpConnection.ascii("POST /v2/models/" + o.model() + "/infer HTTP/1.1\r\n"
                + "Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " + bodyBytes.length
                + "\r\n\r\n" + body);
        long start = System.nanoTime();
        long measureFrom = start + (long) (o.warmupSeconds() * 1e9);
        long end = measureFrom + (long) (o.durationSeconds() * 1e9);
        Client[] clients = new Client[o.clients()];
        Thread[] threads = new Thread[o.clients()];
        long[] serverBefore = new long[1];
        Thread sampler = new Thread(() -> {
            sleepUntil(measureFrom);
            serverBefore[0] = forwardCalls(o);
        });
        sampler.start();
        for (int i = 0; i < clients.length; i++) {
            Client c = clients[i] = new Client();
            threads[i] = new Thread(() -> drive(c, o, request, measureFrom, end), "client-" + i);
            threads[i].start();
        }
        sampler.join();
        sleepUntil(end);
        long callsInWindow = forwardCalls(o) - serverBefore[0];
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(5) + o.giveUpMillis());
        }
        return summarize(o, clients, callsInWindow);
    }

    private static void drive(Client c, Options o, byte[] request, long measureFrom, long end) {
        LoopbackHttpConnection connection = new LoopbackHttpConnection(o.port(), o.giveUpMillis());
        long giveUpNanos = TimeUnit.MILLISECONDS.toNanos(o.giveUpMillis());
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            boolean measured = t0 >= measureFrom;
            try {
                // Each read waits at most the give-up time; the first starts as the request is sent.
                LoopbackHttpConnection.Response r = connection.exchange(request);
                long took = System.nanoTime() - t0;
                if (!measured) {
                    continue;
                }
                if (r.status() == 200 && took <= giveUpNanos) {
                    c.deliveredIn(took);
                } else if (r.status() == 200) {
                    c.late++;
                } else if (r.status() == 503 && new String(r.body(), StandardCharsets.UTF_8).contains("timeout expired")) {
                    c.expired++;
                } else if (r.status() == 503) {
                    c.refused++;
                } else {
                    c.errors++;
                    if (c.firstError == null) {
                        c.firstError = r.status() + " " + new String(r.body(), StandardCharsets.UTF_8);
                    }
                }
            } catch (SocketTimeoutException e) {
                // exchange() closed the connection: the client gives up, the next try reconnects
                if (measured) {
                    c.gaveUp++;
                }
            } catch (IOException e) {
                if (measured) {
                    c.errors++;
                    if (c.firstError == null) {
                        c.firstError = e.toString();
                    }
                }
            }
        }
        connection.close();
    }

    private static Map<String, Object> summarize(Options o, Client[] clients, long calls) {
        long delivered = 0;
        long late = 0;
        long gaveUp = 0;
        long expired = 0;
        long refused = 0;
        long errors = 0;
        String firstError = null;
        long[] all = new long[0];
        for (Client c : clients) {
            delivered += c.delivered;
            late += c.late;
            gaveUp += c.gaveUp;
            expired += c.expired;
            refused += c.refused;
            errors += c.errors;
            firstError = firstError != null ? firstError : c.firstError;
            int n = all.length;
            all = Arrays.copyOf(all, n + (int) c.delivered);
            System.arraycopy(c.latencies, 0, all, n, (int) c.delivered);
        }
        Arrays.sort(all);
        double seconds = o.durationSeconds();
        double capacity = o.instances() * 1000.0 / o.holdMillis();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("label", o.label());
        r.put("clients", o.clients());
        r.put("give_up_ms", o.giveUpMillis());
        r.put("hold_ms", o.holdMillis());
        r.put("timeout_us", o.timeoutMicros());
        r.put("duration_s", seconds);
        r.put("capacity_per_s", round(capacity));
        r.put("goodput_per_s", round(delivered / seconds));
        r.put("goodput_of_capacity", round(delivered / seconds / capacity));
        r.put("forward_calls_per_s", calls < 0 ? null : round(calls / seconds));
        r.put("wasted_calls_per_s", calls < 0 ? null : round(Math.max(0, calls - delivered) / seconds));
        r.put("delivered", delivered);
        r.put("late", late);
        r.put("gave_up", gaveUp);
        r.put("timeout_expired_503", expired);
        r.put("other_503", refused);
        r.put("errors", errors);
        r.put("p50_ms", all.length == 0 ? null : round(all[all.length / 2] / 1e6));
        r.put("p99_ms", all.length == 0 ? null : round(all[Math.min(all.length - 1, (int) (all.length * 0.99))] / 1e6));
        if (firstError != null) {
            r.put("first_error", firstError.length() > 200 ? firstError.substring(0, 200) : firstError);
        }
        return r;
    }

    /** The model's forward calls so far, from the management port's Prometheus page; -1 when unreadable. */
    private static long forwardCalls(Options o) {
        try {
            HttpResponse<String> page = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(o.management().resolve("/actuator/prometheus")).build(),
                    HttpResponse.BodyHandlers.ofString());
            String series = "nv_inference_exec_count{model=\"" + o.model() + "\"";
            long total = 0;
            for (String line : page.body().split("\n")) {
                if (line.startsWith(series)) {
                    total += (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                }
            }
            return total;
        } catch (IOException e) {
            return -1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    private static void sleepUntil(long nanos) {
        long left;
        while ((left = nanos - System.nanoTime()) > 0) {
            try {
                TimeUnit.NANOSECONDS.sleep(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static double round(double v) {
        return Math.round(v * 1000) / 1000.0;
    }

    static Options parse(String[] args) {
        Map<String, String> a = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + args[i]);
            }
            a.put(args[i].substring(2), args[i + 1]);
        }
        URI url = URI.create(a.getOrDefault("url", "http://127.0.0.1:8080"));
        if (!"127.0.0.1".equals(url.getHost())) {
            throw new IllegalArgumentException("only 127.0.0.1 is a target, not " + url.getHost());
        }
        URI management = URI.create(a.getOrDefault("management", "http://127.0.0.1:8081"));
        int clients = Integer.parseInt(a.getOrDefault("clients", "64"));
        double duration = Double.parseDouble(a.getOrDefault("duration", "20"));
        if (clients < 1 || clients > 256 || duration <= 0 || duration > 600) {
            throw new IllegalArgumentException("--clients 1..256, --duration (0, 600] s");
        }
        String jsonOut = a.get("json-out");
        return new Options(url.getPort(), management, a.getOrDefault("model", "slow"), clients,
                Integer.parseInt(a.getOrDefault("give-up-ms", "100")), Double.parseDouble(a.getOrDefault("hold-ms", "20")),
                Long.parseLong(a.getOrDefault("timeout-us", "0")), Integer.parseInt(a.getOrDefault("instances", "1")),
                Double.parseDouble(a.getOrDefault("warmup", "3")), duration,
                a.getOrDefault("label", "run").toLowerCase(Locale.ROOT), jsonOut == null ? null : Path.of(jsonOut));
    }
}
