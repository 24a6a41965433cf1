package io.etserve.config;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.function.BiFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aot.AotDetector;
import org.springframework.boot.actuate.autoconfigure.web.server.ManagementPortType;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.context.ApplicationListener;
import org.springframework.core.SpringProperties;
import org.springframework.core.env.Environment;

/**
 * The settings that decide which beans exist, which Spring's ahead-of-time mode fixes when the jar
 * is built. With {@code -Dspring.aot.enabled=true} (the image starts so) the context comes from
 * bean definitions generated at build time ({@code spring-boot:process-aot}): no configuration
 * classes are parsed and no conditions evaluated at startup, which saves about a quarter of the
 * start's time and CPU (bench/results/2026-12-05-2core-startup-spring-aot.md), but a property a
 * condition read then could no longer change what it chose. So the build records these settings
 * ({@link AotFixedSettingsRecorder}), and a start in AOT mode whose own differ, or that sets
 * {@code etserve.startup.generated-context=false}, turns AOT mode off before the context is
 * created: it builds the context from its settings as a start without the flag does, and says
 * why in one warning. Outside AOT mode this does nothing. Registered in
 * {@code META-INF/spring.factories}, first among the listeners.
 */
public final class AotFixedSettings implements ApplicationListener<ApplicationEnvironmentPreparedEvent> {

    /** Where the build writes the recorded values (a properties file in the jar). */
    static final String RESOURCE = "META-INF/etserve/aot-fixed-settings.properties";

    /**
     * Each setting with what of its value a condition looks at: enough that a change that
     * leaves the beans as they are (a port number, {@code auto} against {@code true}) is let
     * through, and every change that would not is caught.
     */
    static final Map<String, BiFunction<Environment, Binder, String>> SETTINGS = settings();
    private static final ConfigurationPropertyName MANAGEMENT = ConfigurationPropertyName.of("management");
    private static final ConfigurationPropertyName MANAGEMENT_SERVER = ConfigurationPropertyName.of("management.server");

    private static Map<String, BiFunction<Environment, Binder, String>> settings() {
        Map<String, BiFunction<Environment, Binder, String>> s = new LinkedHashMap<>();
        for (String key : List.of("spring.profiles.active", "spring.autoconfigure.exclude",
                "spring.threads.virtual.enabled", "spring.mvc.problemdetails.enabled", "etserve.tracing.enabled",
                "etserve.grpc.enabled")) {
            s.put(key, (env, binder) -> text(binder, key));
        }
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
     * The settings, and every {@code management.*} property set (but the management server's,
     * whose port counts only as its kind): Actuator's conditions read many of them (which
     * endpoints and health indicators exist, what is exported), so any of them set otherwise
     * counts, even the few read at startup in either mode (a start then only takes longer).
     */
    static Map<String, String> read(Environment env) {
        Map<String, String> out = new TreeMap<>();
        Binder binder = Binder.get(env);
        SETTINGS.forEach((key, classify) -> out.put(key, classify.apply(env, binder)));
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(env)) {
            if (source instanceof IterableConfigurationPropertySource names) {
                names.stream().filter(n -> MANAGEMENT.isAncestorOf(n) && !MANAGEMENT_SERVER.isAncestorOf(n))
                        .forEach(n -> out.putIfAbsent(n.toString(), text(binder, n.toString())));
            }
        }
        return out;
    }

    /** One line per setting whose value differs from the build's (or is set on one side only), in key order. */
    static List<String> differences(Map<String, String> built, Map<String, String> now) {
        List<String> out = new ArrayList<>();
        TreeMap<String, String> keys = new TreeMap<>(built);
        keys.putAll(now);
        keys.keySet().forEach(key -> {
            String then = built.getOrDefault(key, "");
            String value = now.getOrDefault(key, "");
            if (!then.equals(value)) {
                out.add(key + ": built with '" + then + "', now '" + value + "'");
            }
        });
        return out;
    }

    @Override
    public void onApplicationEvent(ApplicationEnvironmentPreparedEvent event) {
        if (!AotDetector.useGeneratedArtifacts()) {
            return;
        }
        Logger log = LoggerFactory.getLogger(AotFixedSettings.class);
        Optional<String> why = reasonToBuildAtStartup(event.getEnvironment(), recorded(getClass().getClassLoader()));
        if (why.isEmpty()) {
            log.info("Starting from the context generated at build time (spring.aot.enabled=true)");
            return;
        }
        // Read by SpringApplication when it creates and fills the context, which comes next.
        SpringProperties.setProperty(AotDetector.AOT_ENABLED, "false");
        log.warn("Not using the context generated at build time (spring.aot.enabled=true): {}. Building it from"
                + " the settings instead; the start takes longer.", why.get());
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
