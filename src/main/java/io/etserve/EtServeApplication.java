package io.etserve;

import io.etserve.config.JettyCacheLine;
import io.etserve.config.StartupClassPreload;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/** etserve: ExecuTorch programs over the Open Inference Protocol. */
@SpringBootApplication
@ConfigurationPropertiesScan
public class EtServeApplication {
    public static void main(String[] args) {
        // First, so the other cores load what the main thread is about to need.
        StartupClassPreload.start(EtServeApplication.class.getClassLoader());
        JettyCacheLine.preset();
        SpringApplication.run(EtServeApplication.class, args);
    }
}
