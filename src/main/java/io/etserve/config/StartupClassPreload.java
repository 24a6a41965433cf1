package io.etserve.config;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
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
 * main thread. A start without an AOT cache spends most of its main thread loading some ten
 * thousand classes one after another: finding each in the jar, parsing and defining it. Loaded
 * here first, in the order a recorded start loaded them, the main thread finds most of them
 * already defined, and the cores a host has beside the main thread do that work.
 *
 * <p>The list, {@value #LIST}, is recorded when the jar is built (scripts/startup-classes.sh: a
 * start on the demo models, a few inference calls, {@code -Xlog:class+load}). A name the list
 * lacks loads on first use as it always did; one that no longer exists is skipped. Classes are
 * loaded without being initialized, so no static initializer runs on these threads and none
 * can deadlock against the main thread's.
 *
 * <p>{@value #THREADS_PROPERTY} (system property) or {@value #THREADS_VARIABLE} (environment)
 * sets the number of threads, 0 turns it off; read before the configuration is, so
 * {@code application.yml} cannot set it. At debug level, {@link Report} says what it did.
 */
public final class StartupClassPreload {

    /** What a preload did: names listed, classes loaded, threads, and when the last one finished. */
    record Summary(int listed, int loaded, int threads, long millis) {
    }

    private static final AtomicReference<CompletableFuture<Summary>> started = new AtomicReference<>();

    static final String LIST = "META-INF/etserve/startup-classes.txt";
    static final String THREADS_PROPERTY = "etserve.startup.preload-threads";
    static final String THREADS_VARIABLE = "ETSERVE_STARTUP_PRELOAD_THREADS";

    private StartupClassPreload() {
    }

    /**
     * Starts the preloading threads when the list is on the class path and threads are wanted;
     * returns at once.
     */
    public static void start(ClassLoader loader) {
        int threads = threads(System.getProperty(THREADS_PROPERTY), System.getenv(THREADS_VARIABLE),
                Runtime.getRuntime().availableProcessors());
        if (threads > 0 && loader.getResource(LIST) != null && started.get() == null) {
            started.compareAndSet(null, preload(loader, threads));
        }
    }

    /** Starts {@code threads} threads on the loader's list; completes with what they did. */
    static CompletableFuture<Summary> preload(ClassLoader loader, int threads) {
        CompletableFuture<Summary> done = new CompletableFuture<>();
        long t0 = System.nanoTime();
        // The list is read on the first thread too: the main thread only starts it.
        daemon("class-preload-0", () -> {
            List<String> names = read(loader);
            AtomicInteger running = new AtomicInteger(threads);
            AtomicInteger loaded = new AtomicInteger();
            Runnable[] shares = new Runnable[threads];
            for (int t = 0; t < threads; t++) {
                int share = t;
                shares[t] = () -> {
                    loaded.addAndGet(load(names, share, threads, loader));
                    if (running.decrementAndGet() == 0) {
                        done.complete(new Summary(names.size(), loaded.get(), threads, (System.nanoTime() - t0) / 1_000_000));
                    }
                };
            }
            for (int t = 1; t < threads; t++) {
                daemon("class-preload-" + t, shares[t]).start();
            }
            shares[0].run();
        }).start();
        return done;
    }

    /**
     * The number of threads: as set (the property before the variable; 0 turns preloading off),
     * else a quarter of the cores, at least one and at most four. The main thread and the JIT's
     * compiler threads keep the rest; beyond four, threads mostly wait for each other.
     */
    static int threads(String property, String variable, int cores) {
        String set = property != null ? property : variable;
        if (set != null && !set.isBlank()) {
            try {
                return Math.max(0, Integer.parseInt(set.strip()));
            } catch (NumberFormatException e) {
                // an unreadable setting preloads as by default: it cannot change what the service does
            }
        }
        return Math.min(4, Math.max(1, cores / 4));
    }

    /**
     * Thread {@code t} of {@code n} loads every n-th name from the t-th, so all threads work near
     * the front of the list, where the main thread is.
     */
    static int load(List<String> names, int t, int n, ClassLoader loader) {
        int loaded = 0;
        for (int i = t; i < names.size(); i += n) {
            try {
                Class.forName(names.get(i), false, loader);
                loaded++;
            } catch (ClassNotFoundException | LinkageError e) {
                // gone since the list was recorded, or not loadable here: the main thread never asks,
                // or gets the same error it would have got without preloading
            }
        }
        return loaded;
    }

    static List<String> read(ClassLoader loader) {
        List<String> names = new ArrayList<>(12_000);
        try (InputStream in = loader.getResourceAsStream(LIST)) {
            if (in == null) {
                return names;
            }
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
     * Says at debug level, once the service is ready, what the preload did (or that it did not run
     * or has not finished). Registered in {@code META-INF/spring.factories}.
     */
    public static final class Report implements ApplicationListener<ApplicationReadyEvent> {

        private static final Logger log = LoggerFactory.getLogger(StartupClassPreload.class);

        @Override
        public void onApplicationEvent(ApplicationReadyEvent event) {
            if (!log.isDebugEnabled()) {
                return;
            }
            CompletableFuture<Summary> preload = started.get();
            if (preload == null) {
                log.debug("No classes preloaded (no {} on the class path, or {}=0)", LIST, THREADS_PROPERTY);
            } else if (!preload.isDone()) {
                log.debug("Still preloading classes when the service became ready");
            } else {
                Summary s = preload.join();
                log.debug("Preloaded {} of {} listed classes on {} thread(s) in {} ms", s.loaded(), s.listed(), s.threads(), s.millis());
            }
        }
    }
}
