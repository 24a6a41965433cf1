package io.etserve;

import io.etserve.config.JettyCacheLine;
import io.etserve.config.ServiceVersion;
import io.etserve.config.StartupClassPreload;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/** etserve: ExecuTorch programs over the Open Inference Protocol. */
@SpringBootApplication
@ConfigurationPropertiesScan
public class EtServeApplication {
    public static void main(String[] args) {
        if (versionAsked(args)) {
            // Before anything starts: Spring Boot would read the argument as a property and serve.
            System.out.println("etserve " + ServiceVersion.current());
            return;
        }
        // First, so the other cores load what the main thread is about to need.
        StartupClassPreload.start(EtServeApplication.class.getClassLoader());
        JettyCacheLine.preset();
        SpringApplication.run(EtServeApplication.class, args);
    }

    /** {@code --version} (or {@code -V}) alone: print the version and exit. */
    static boolean versionAsked(String[] args) {
        return args.length == 1 && (args[0].equals("--version") || args[0].equals("-V"));
    }
}
