package io.etserve.config;

import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.PropertySourcesPlaceholdersResolver;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.support.EnvironmentPostProcessorApplicationListener;
import org.springframework.context.ApplicationListener;
import org.springframework.core.Ordered;
import org.springframework.core.env.ConfigurableEnvironment;

/**
 * Binds {@code etserve.*} once on a thread of its own as soon as the configuration is read, and
 * throws the result away. The first binding of {@link EtServeProperties}, a tree of records, is
 * mostly first-time work: each constructor's parameters and their annotations read by reflection,
 * the environment's conversion service asked for its converters (the one the context's binding
 * uses), the binder's classes initialized. The context binds it on the main thread while it
 * creates the web server (bench/results/2026-12-05-startup-probe-warmup.md); done here first,
 * that binding finds the JVM's and Spring's caches filled. The records' constructors only check
 * and copy their values, so binding twice has no other effect; a failure here is ignored (the
 * context's own binding reports it). Registered in {@code META-INF/spring.factories};
 * {@code etserve.startup.early-bind=false} turns it off.
 */
public final class PropertiesEarlyBind implements ApplicationListener<ApplicationEnvironmentPreparedEvent>, Ordered {

    /** As soon as the configuration files are read (Boot's listener at +10), to finish well before the context binds. */
    @Override
    public int getOrder() {
        return EnvironmentPostProcessorApplicationListener.DEFAULT_ORDER + 1;
    }

    @Override
    public void onApplicationEvent(ApplicationEnvironmentPreparedEvent event) {
        ConfigurableEnvironment env = event.getEnvironment();
        if (Boolean.getBoolean("spring.aot.processing")  // the build's AOT run binds nothing it serves with
                || !env.getProperty("etserve.startup.early-bind", Boolean.class, true)) {
            return;
        }
        // The environment's conversion service, as the context's binding has (Binder.get would
        // bring a shared one whose converter cache the context never reads).
        Binder binder = new Binder(ConfigurationPropertySources.get(env), new PropertySourcesPlaceholdersResolver(env),
                env.getConversionService(), null);
        Thread thread = new Thread(() -> bind(binder), "properties-early-bind");
        thread.setDaemon(true);
        thread.start();
    }

    /** Binds and forgets; false when the values do not bind (the context's own binding says why). */
    static boolean bind(Binder binder) {
        try {
            binder.bindOrCreate(EtServeProperties.PREFIX, EtServeProperties.class);
            return true;
        } catch (RuntimeException | LinkageError e) {
            return false;
        }
    }
}
