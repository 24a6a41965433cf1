package io.etserve.config;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.ApplicationListener;

/**
 * Loads the classes a start of the packaged service needs on background threads, ahead of the
 * main thread. A start without an AOT cache spends most of its main thread loading classes (some
 * 7,000 from the jar and the JDK, besides those the JDK's archive holds) one after another:
 * finding each in the jar, parsing and defining it. Loaded here first, in the order a recorded
 * start loaded them, the main thread finds most of them already defined, and the cores a host
 * has beside the main thread do that work.
 *
 * <p>The list, {@value #LIST}, is recorded when the jar is built (scripts/startup-classes.sh: a
 * start on the demo models, a few inference calls, {@code -Xlog:class+load}). A name the list
 * lacks loads on first use as it always did; one that no longer exists is skipped. The listed
 * classes are loaded without being initialized: none of their static initializers runs on these
 * threads, so none can deadlock against the main thread's.
 *
 * <p>{@value #THREADS_PROPERTY} (system property) or {@value #THREADS_VARIABLE} (environment)
 * sets the number of threads, 0 turns it off; read before the configuration is, so
 * {@code application.yml} cannot set it. At debug level, {@link Report} says what it did.
 */
public final class StartupClassPreload {

    /**
     * What a preload did: names listed, names that resolved to a class (loaded here, or already
     * by the main thread), threads, and when the last thread finished.
     */
    record Summary(int listed, int resolved, int threads, long millis) {
    }

    static final String LIST = "META-INF/etserve/startup-classes.txt";
    static final String THREADS_PROPERTY = "etserve.startup.preload-threads";
    static final String THREADS_VARIABLE = "ETSERVE_STARTUP_PRELOAD_THREADS";

    private static final AtomicReference<CompletableFuture<Summary>> started = new AtomicReference<>();

    private StartupClassPreload() {
    }

    /**
     * Starts the preloading threads, once per JVM, when the list is on the class path and threads
     * are wanted; returns at once.
     */
    public static void start(ClassLoader loader) {
        int cores = Runtime.getRuntime().availableProcessors();
        int threads = threads(System.getProperty(THREADS_PROPERTY), System.getenv(THREADS_VARIABLE), cores);
        URL list = threads > 0 ? loader.getResource(LIST) : null;
        CompletableFuture<Summary> done = new CompletableFuture<>();
        if (list != null && started.compareAndSet(null, done)) {
            preload(loader, list, threads, done);
        }
    }

    /**
     * Starts {@code threads} threads on the list at {@code list} (null: none), loading with
     * {@code loader}; {@code done} completes with what they did.
     */
    static CompletableFuture<Summary> preload(ClassLoader loader, URL list, int threads,
            CompletableFuture<Summary> done) {
        long t0 = System.nanoTime();
        // The list is read on the first thread too: the main thread only starts it.
        Runnable first = () -> {
            List<String> names = read(list);
            AtomicInteger running = new AtomicInteger(threads);
            AtomicInteger resolved = new AtomicInteger();
            Runnable[] shares = new Runnable[threads];
            for (int t = 0; t < threads; t++) {
                int share = t;
                shares[t] = () -> {
                    try {
                        resolved.addAndGet(load(names, share, threads, loader));
                    } finally {
                        if (running.decrementAndGet() == 0) {
                            done.complete(new Summary(names.size(), resolved.get(), threads,
                                    (System.nanoTime() - t0) / 1_000_000));
                        }
                    }
                };
            }
            for (int t = 1; t < threads; t++) {
                try {
                    daemon("class-preload-" + t, shares[t]).start();
                } catch (RuntimeException | OutOfMemoryError e) {
                    shares[t].run();  // no thread to spare: this one takes the share
                }
            }
            shares[0].run();
        };
        try {
            daemon("class-preload-0", () -> {
                try {
                    first.run();
                } catch (RuntimeException | Error e) {
                    done.completeExceptionally(e);
                }
            }).start();
        } catch (RuntimeException | OutOfMemoryError e) {
            done.completeExceptionally(e);  // no thread: the start goes as it would without a list
        }
        return done;
    }

    /**
     * The number of threads: as set (the property before the variable; 0 turns preloading off; at
     * most one per core), else a quarter of the cores, at least one and at most four. The main
     * thread and the JIT's compiler threads keep the rest; beyond four, threads mostly wait for
     * each other (bench/results/2026-12-05-startup-class-preload.md).
     */
    static int threads(String property, String variable, int cores) {
        String set = property != null && !property.isBlank() ? property : variable;
        if (set != null && !set.isBlank()) {
            try {
                return Math.min(cores, Math.max(0, Integer.parseInt(set.strip())));
            } catch (NumberFormatException e) {
                // an unreadable setting preloads as by default: it cannot change what the service does
            }
        }
        return Math.min(4, Math.max(1, cores / 4));
    }

    /**
     * Thread {@code t} of {@code n} loads every n-th name from the t-th, so all threads work near
     * the front of the list, where the main thread is; returns how many resolved to a class.
     */
    static int load(List<String> names, int t, int n, ClassLoader loader) {
        int resolved = 0;
        for (int i = t; i < names.size(); i += n) {
            try {
                Class.forName(names.get(i), false, loader);
                resolved++;
            } catch (ClassNotFoundException | LinkageError | RuntimeException e) {
                // gone since the list was recorded, or not loadable here: the main thread never asks,
                // or gets the same error it would have got without preloading
            }
        }
        return resolved;
    }

    /** The names at {@code list}, in order; none when it is null or cannot be read. */
    static List<String> read(URL list) {
        List<String> names = new ArrayList<>(8_192);
        if (list == null) {
            return names;
        }
        try (InputStream in = list.openStream()) {
            BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            for (String line; (line = reader.readLine()) != null; ) {
                if (!line.isBlank()) {
                    names.add(line.strip());
                }
            }
        } catch (IOException e) {
            // no list read, nothing preloaded: the start goes as it would without one
        }
        return names;
    }

    private static Thread daemon(String name, Runnable work) {
        Thread thread = new Thread(work, name);
        thread.setDaemon(true);
        return thread;
    }

    /**
     * Says at debug level what the preload did, once the service is ready or, when it is still
     * going then, once it finishes. Registered in {@code META-INF/spring.factories}.
     */
    public static final class Report implements ApplicationListener<ApplicationReadyEvent> {

        // Here, not in the outer class: main() must not start the logging system before Spring does.
        private static final Logger log = LoggerFactory.getLogger(StartupClassPreload.class);

        @Override
        public void onApplicationEvent(ApplicationReadyEvent event) {
            if (!log.isDebugEnabled()) {
                return;
            }
            CompletableFuture<Summary> preload = started.get();
            if (preload == null) {
                log.debug("No classes preloaded: no {} on the class path, {} or {} set to 0, or a start other "
                        + "than the application's main method (a test)", LIST, THREADS_PROPERTY, THREADS_VARIABLE);
                return;
            }
            if (!preload.isDone()) {
                log.debug("Still preloading classes when the service became ready");
            }
            preload.whenComplete((summary, failure) -> {
                if (summary != null) {
                    log.debug("Preloaded classes: {} of {} listed resolved on {} thread(s) in {} ms", summary.resolved(),
                            summary.listed(), summary.threads(), summary.millis());
                } else {
                    log.debug("Preloading classes stopped: {}", failure.toString());
                }
            });
        }
    }
}
