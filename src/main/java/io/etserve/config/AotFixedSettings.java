package io.etserve.config;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URL;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.BiFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aot.AotDetector;
import org.springframework.boot.actuate.autoconfigure.web.server.ManagementPortType;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.boot.context.event.ApplicationPreparedEvent;
import org.springframework.boot.context.event.SpringApplicationEvent;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.boot.support.EnvironmentPostProcessorApplicationListener;
import org.springframework.context.ApplicationListener;
import org.springframework.core.Ordered;
import org.springframework.core.SpringProperties;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;

/**
 * The settings that decide which beans exist, which Spring's ahead-of-time mode fixes when the jar
 * is built. In AOT mode the context comes from bean definitions generated at build time
 * ({@code spring-boot:process-aot}): no configuration classes are parsed and no conditions
 * evaluated at startup, which shortens every start (bench/results/2026-12-05-2core-startup-spring-aot.md
 * and 2026-12-05-2core-startup-plain-jar.md), but a property a condition read then
 * could no longer change what it chose. So the build records these settings
 * ({@link AotFixedSettingsRecorder}), and a start whose own differ, or that sets
 * {@code etserve.startup.generated-context=false}, builds the context from its settings instead
 * and says why once.
 *
 * <p>A start from the packaged jar uses AOT mode unless {@code spring.aot.enabled} says
 * otherwise; a start that asked for it ({@code -Dspring.aot.enabled=true}, as the image does) is
 * warned when it cannot have it. Classes outside a jar (tests, {@code mvn spring-boot:run}) may
 * be newer than the generated definitions, so they build the context at startup unless asked.
 * Registered in {@code META-INF/spring.factories}; runs as soon as the configuration files are
 * read, before the context is created.
 */
public final class AotFixedSettings implements ApplicationListener<SpringApplicationEvent>, Ordered {

    /** Where the build writes the recorded values (a properties file in the jar). */
    static final String RESOURCE = "META-INF/etserve/aot-fixed-settings.properties";

    /**
     * Each setting with what of its value a condition looks at: enough that a change that
     * leaves the beans as they are (a port number, {@code auto} against {@code true}) is let
     * through, and every change that would not is caught.
     */
    static final Map<String, BiFunction<Environment, Binder, String>> SETTINGS = settings();
    private static final ConfigurationPropertyName MANAGEMENT = ConfigurationPropertyName.of("management");
    /**
     * Under {@code management.*} but read at startup, and set through the environment variables
     * the docs name: the management server's address and port (its kind counts, above), the
     * tracing sample ratio and OTLP endpoint.
     */
    private static final List<ConfigurationPropertyName> READ_AT_STARTUP = List.of(
            ConfigurationPropertyName.of("management.server"),
            ConfigurationPropertyName.of("management.tracing.sampling"),
            ConfigurationPropertyName.of("management.opentelemetry.tracing.export.otlp"));

    /** What to say, once logging is set up (it is not yet when the decision is made). */
    private Runnable report;

    /**
     * Right after the configuration files are read (Boot's listener at +10) and the threads that
     * start CUDA and bind the properties early (+11), before logging (+20) and the rest.
     */
    @Override
    public int getOrder() {
        return EnvironmentPostProcessorApplicationListener.DEFAULT_ORDER + 2;
    }

    private static Map<String, BiFunction<Environment, Binder, String>> settings() {
        Map<String, BiFunction<Environment, Binder, String>> s = new LinkedHashMap<>();
        // Boot's own conditions on spring.* and server.* that a user of this service may set;
        // the rest of those trees (ports, timeouts, Jetty's threads) is read at startup.
        for (String key : List.of("spring.autoconfigure.exclude", "spring.profiles.include",
                "spring.threads.virtual.enabled", "spring.mvc.problemdetails.enabled", "spring.jmx.enabled",
                "spring.main.web-application-type", "spring.servlet.multipart.enabled",
                "spring.web.error.whitelabel.enabled", "spring.mvc.hiddenmethod.filter.enabled",
                "spring.mvc.formcontent.filter.enabled", "server.forward-headers-strategy", "server.ssl.enabled",
                "management.server.add-application-context-header", "etserve.tracing.enabled",
                "etserve.grpc.enabled")) {
            s.put(key, (env, binder) -> text(binder, key));
        }
        // Profiles as the environment resolved them (spring.profiles.active, groups, the API).
        s.put("active profiles", (env, binder) -> String.join(",", env.getActiveProfiles()));
        // A separate management port builds a child context; the same port or none does not.
        s.put("management.server.port", (env, binder) -> ManagementPortType.get(env).name());
        s.put("etserve.cuda.enabled",
                (env, binder) -> "false".equals(text(binder, "etserve.cuda.enabled")) ? "false" : "auto or true");
        s.put("etserve.repository.mode",
                (env, binder) -> "poll".equals(text(binder, "etserve.repository.mode")) ? "poll" : "not poll");
        return Map.copyOf(s);
    }

    /** A value as the binder reads it (relaxed names, lists joined), lower case; "" when unset. */
    private static String text(Binder binder, String key) {
        try {
            return String.join(",", binder.bind(key, Bindable.listOf(String.class)).orElse(List.of()))
                    .strip().toLowerCase(Locale.ROOT);
        } catch (RuntimeException unreadable) {
            return "(unreadable: " + unreadable.getClass().getSimpleName() + ")";  // as unlike any value
        }
    }

    /**
     * The settings, and every {@code management.*} property set but those {@link #READ_AT_STARTUP}:
     * Actuator's conditions read many of them (which endpoints and health indicators exist, what
     * is exported), so any other set otherwise counts, even one read at startup in either mode (a
     * start then only takes longer).
     */
    static Map<String, String> read(Environment env) {
        Map<String, String> out = new TreeMap<>();
        Binder binder = Binder.get(env);
        SETTINGS.forEach((key, classify) -> out.put(key, classify.apply(env, binder)));
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(env)) {
            if (source instanceof IterableConfigurationPropertySource names) {
                names.stream().filter(AotFixedSettings::countsAsManagementSetting)
                        .forEach(n -> out.putIfAbsent(n.toString(), text(binder, n.toString())));
            }
        }
        return out;
    }

    private static boolean countsAsManagementSetting(ConfigurationPropertyName name) {
        return MANAGEMENT.isAncestorOf(name) && READ_AT_STARTUP.stream().noneMatch(p -> p.isAncestorOf(name));
    }

    /** One line per setting whose value differs from the build's (or is set on one side only), in key order. */
    static List<String> differences(Map<String, String> built, Map<String, String> now) {
        List<String> out = new ArrayList<>();
        TreeSet<String> keys = new TreeSet<>(built.keySet());
        keys.addAll(now.keySet());
        keys.forEach(key -> {
            String then = built.getOrDefault(key, "");
            String value = now.getOrDefault(key, "");
            if (!then.equals(value)) {
                out.add(key + ": built with '" + then + "', now '" + value + "'");
            }
        });
        return out;
    }

    @Override
    public void onApplicationEvent(SpringApplicationEvent event) {
        if (event instanceof ApplicationEnvironmentPreparedEvent prepared) {
            boolean packaged = generatedContextInJar(prepared.getSpringApplication().getMainApplicationClass());
            switch (mode(SpringProperties.getProperty(AotDetector.AOT_ENABLED), packaged)) {
                case ASKED -> decide(prepared.getEnvironment(), true);
                case BY_DEFAULT -> decide(prepared.getEnvironment(), false);
                case OFF -> { }
            }
        } else if (event instanceof ApplicationPreparedEvent && report != null) {
            report.run();
            report = null;
        }
    }

    /** Whether a start may use AOT mode, and whether it asked for it. */
    enum Mode { ASKED, BY_DEFAULT, OFF }

    /**
     * @param aotEnabled {@code spring.aot.enabled} as given (system property or spring.properties), null when unset
     * @param packaged whether the application's classes and their generated definitions come from a jar
     */
    static Mode mode(String aotEnabled, boolean packaged) {
        if (aotEnabled != null) {
            return Boolean.parseBoolean(aotEnabled) ? Mode.ASKED : Mode.OFF;
        }
        return packaged ? Mode.BY_DEFAULT : Mode.OFF;
    }

    /**
     * Whether {@code main}'s jar carries the definitions generated at its build: the settings
     * recorded then, read from a jar, and the generated initializer that SpringApplication loads.
     */
    static boolean generatedContextInJar(Class<?> main) {
        if (main == null) {
            return false;
        }
        ClassLoader loader = main.getClassLoader();
        URL recorded = loader.getResource(RESOURCE);
        return recorded != null && "jar".equals(recorded.getProtocol())
                && ClassUtils.isPresent(main.getName() + "__ApplicationContextInitializer", loader);
    }

    private void decide(Environment env, boolean asked) {
        Logger log = LoggerFactory.getLogger(AotFixedSettings.class);
        Optional<String> why = reasonToBuildAtStartup(env, recorded(getClass().getClassLoader()));
        // Read by SpringApplication when it creates and fills the context, which comes next.
        SpringProperties.setProperty(AotDetector.AOT_ENABLED, Boolean.toString(why.isEmpty()));
        if (why.isEmpty()) {
            report = () -> log.info("Starting from the context generated at build time{}",
                    asked ? " (spring.aot.enabled=true)" : "");
        } else if (asked) {
            report = () -> log.warn("Not using the context generated at build time (spring.aot.enabled=true): {}."
                    + " Built it from the settings instead; the start took longer.", why.get());
        } else {
            report = () -> log.info("Building the context from the settings, not the one generated at build time: {}",
                    why.get());
        }
    }

    /** Why this start cannot use the generated context, if it cannot. */
    static Optional<String> reasonToBuildAtStartup(Environment env, Map<String, String> built) {
        if (!env.getProperty("etserve.startup.generated-context", Boolean.class, true)) {
            return Optional.of("etserve.startup.generated-context=false");
        }
        if (built.isEmpty()) {
            return Optional.of("the jar carries no record of the settings it was built with");
        }
        List<String> differences = differences(built, read(env));
        return differences.isEmpty() ? Optional.empty()
                : Optional.of("settings that decide which beans exist differ from the build's ("
                        + String.join("; ", differences) + ")");
    }

    static Map<String, String> recorded(ClassLoader loader) {
        try (InputStream in = loader.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                return Map.of();
            }
            Properties p = new Properties();
            p.load(in);
            Map<String, String> out = new LinkedHashMap<>();
            p.stringPropertyNames().forEach(k -> out.put(k, p.getProperty(k)));
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + RESOURCE, e);
        }
    }
}
