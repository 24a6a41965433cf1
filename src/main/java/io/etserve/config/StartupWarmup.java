package io.etserve.config;

import java.lang.management.ManagementFactory;
import java.lang.reflect.Constructor;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Set;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.context.ApplicationListener;

/**
 * Work of the JDK's that the context's start does later on its main thread, done first on a thread
 * of its own while Spring reads its configuration: the platform MBean server (Jetty's thread pool
 * asks for it when the web server is created) and the reflective accessors of the constructors
 * that bind {@link EtServeProperties} (the JDK spins a method handle for each on its first call).
 * Either is safe to do twice or at once, and no class of this service or its libraries is
 * initialized here, so nothing can wait on this thread (Netty's, say, could deadlock against
 * the main thread's class loading, so gRPC starts where it did). On two busy cores the start is
 * as long either way; with cores to spare the main thread has that much less to do. Registered
 * in {@code META-INF/spring.factories}; {@code etserve.startup.warmup=false} turns it off.
 */
public final class StartupWarmup implements ApplicationListener<ApplicationEnvironmentPreparedEvent> {

    @Override
    public void onApplicationEvent(ApplicationEnvironmentPreparedEvent event) {
        if (Boolean.getBoolean("spring.aot.processing")  // the build's AOT run serves nothing
                || !event.getEnvironment().getProperty("etserve.startup.warmup", Boolean.class, true)) {
            return;
        }
        Thread thread = new Thread(StartupWarmup::warm, "startup-warmup");
        thread.setDaemon(true);
        thread.start();
    }

    static void warm() {
        try {
            ManagementFactory.getPlatformMBeanServer();
            prepareConstructors(EtServeProperties.class);
        } catch (RuntimeException | LinkageError e) {
            // only a head start: the main thread does the same when it gets there
        }
    }

    /**
     * Makes the JDK create the accessor of every record constructor the binder will call, without
     * running any: a call with no arguments fails the argument count once the accessor exists.
     * The accessor is kept on the constructor's root, which the binder's lookups share.
     *
     * @return the record types visited
     */
    static Set<Class<?>> prepareConstructors(Class<? extends Record> root) {
        Set<Class<?>> seen = new HashSet<>();
        ArrayDeque<Class<?>> todo = new ArrayDeque<>(Set.of(root));
        while (!todo.isEmpty()) {
            Class<?> type = todo.pop();
            if (!type.isRecord() || !seen.add(type)) {
                continue;
            }
            RecordComponent[] components = type.getRecordComponents();
            Class<?>[] parameters = new Class<?>[components.length];
            for (int i = 0; i < components.length; i++) {
                parameters[i] = components[i].getType();
                todo.push(parameters[i]);
                if (components[i].getGenericType() instanceof ParameterizedType generic) {
                    for (Type argument : generic.getActualTypeArguments()) {
                        if (argument instanceof Class<?> element) {
                            todo.push(element);  // a list's or map's records
                        }
                    }
                }
            }
            try {
                Constructor<?> canonical = type.getDeclaredConstructor(parameters);
                if (parameters.length > 0) {
                    canonical.newInstance();
                }
            } catch (IllegalArgumentException expected) {
                // the accessor was made; the constructor did not run
            } catch (ReflectiveOperationException | RuntimeException e) {
                // not reachable from here (access), or unlike a record's canonical constructor
            }
        }
        return seen;
    }
}
