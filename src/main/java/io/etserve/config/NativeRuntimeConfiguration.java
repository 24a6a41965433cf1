package io.etserve.config;

import io.etserve.runtime.NativeRuntime;
import java.nio.file.Path;
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
        Path extract = n.extractDir() != null ? n.extractDir() : defaultExtractDir();
        NativeRuntime.Info info = NativeRuntime.load(
                new NativeRuntime.Options(Optional.ofNullable(n.libraryDir()), extract, n.extraLibraries()));
        log.info("ExecuTorch bridge loaded from {}; delegates registered: {}", info.directory(),
                info.registeredBackends());
        return info;
    }

    static Path defaultExtractDir() {
        return Path.of(System.getProperty("java.io.tmpdir"), "etserve-native");
    }
}
