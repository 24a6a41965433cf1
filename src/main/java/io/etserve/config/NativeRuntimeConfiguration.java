package io.etserve.config;

import io.etserve.runtime.NativeRuntime;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The ExecuTorch bridge and the delegate libraries beside it ({@code etserve.native.*}). A bridge
 * that cannot load ends startup with {@link NativeLibraryFailureAnalyzer}'s one sentence. The
 * load usually began earlier, off the main thread ({@link NativeEarlyLoad}); this waits for it.
 */
@Configuration(proxyBeanMethods = false)
class NativeRuntimeConfiguration {

    private static final Logger log = LoggerFactory.getLogger(NativeRuntimeConfiguration.class);

    @Bean
    NativeRuntime.Info nativeRuntime(EtServeProperties props) {
        EtServeProperties.Native n = props.nativeRuntime();
        NativeRuntime.Info info = NativeRuntime.load(options(n.libraryDir(), n.extractDir(), n.extraLibraries()));
        log.info("ExecuTorch bridge loaded from {}; delegates registered: {}", info.directory(),
                info.registeredBackends());
        int asked = n.cpuThreadsOrAvailable();
        int threads = NativeRuntime.sizeCpuThreads(asked);
        if (threads == asked) {
            log.info("ExecuTorch's CPU threadpool: {} threads (etserve.native.cpu-threads)", threads);
        } else {
            // A program loaded in this process first (tests, or a second context): its pool stays.
            log.warn("ExecuTorch's CPU threadpool keeps {} threads, not the {} asked (etserve.native.cpu-threads):"
                    + " a program was loaded before it was sized", threads, asked);
        }
        return info;
    }

    /**
     * The load's options from {@code etserve.native.*} as bound (null: unset): the jar's libraries,
     * extracted under the temporary directory, unless a library directory is set.
     */
    static NativeRuntime.Options options(Path libraryDir, Path extractDir, List<Path> extraLibraries) {
        return new NativeRuntime.Options(Optional.ofNullable(libraryDir),
                extractDir != null ? extractDir : Path.of(System.getProperty("java.io.tmpdir"), "etserve-native"),
                extraLibraries);
    }
}
