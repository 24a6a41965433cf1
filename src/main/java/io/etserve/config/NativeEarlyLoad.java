package io.etserve.config;

import io.etserve.cuda.CudaEarlyStart;
import io.etserve.runtime.NativeRuntime;
import java.nio.file.Path;
import java.util.List;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.ApplicationListener;
import org.springframework.core.env.Environment;

/**
 * Loads the ExecuTorch bridge while Spring builds the context. Extracting the jar's libraries
 * (checked byte for byte against an earlier extraction) and loading them take a few hundred
 * milliseconds that depend on nothing in the context, and the context needs them only when it
 * creates {@link NativeRuntimeConfiguration}'s bean, seconds later. That bean calls
 * {@link NativeRuntime#load} again: it waits for this load, or does it itself when this one
 * failed (and then reports the failure as it always did). Registered in
 * {@code META-INF/spring.factories}; {@code etserve.native.early-load=false} turns it off.
 */
public final class NativeEarlyLoad implements ApplicationListener<ApplicationEnvironmentPreparedEvent> {

    @Override
    public void onApplicationEvent(ApplicationEnvironmentPreparedEvent event) {
        Environment env = event.getEnvironment();
        if (NativeRuntime.isLoaded() || !env.getProperty("etserve.native.early-load", Boolean.class, true)
                || Boolean.getBoolean("spring.aot.processing")) {  // the build's AOT run serves nothing
            return;
        }
        NativeRuntime.Options options = options(Binder.get(env));
        Thread thread = new Thread(() -> {
            try {
                // After CUDA's early start (its listener is ordered before this one), as in the context:
                // the bridge then resolves the libcudart that JavaCPP's bindings already hold.
                CudaEarlyStart.awaitEarlyStart();
                NativeRuntime.load(options);
            } catch (RuntimeException | LinkageError e) {
                // The bean's own load tries again and ends startup with the failure's sentence.
            }
        }, "native-early-load");
        thread.setDaemon(true);
        thread.start();
    }

    /**
     * The options the bean will use, read as the properties bind (relaxed names, environment
     * variables); the extra delegate libraries are left to the bean, which loads them after.
     */
    static NativeRuntime.Options options(Binder binder) {
        return NativeRuntimeConfiguration.options(binder.bind("etserve.native.library-dir", Path.class).orElse(null),
                binder.bind("etserve.native.extract-dir", Path.class).orElse(null), List.of());
    }
}
