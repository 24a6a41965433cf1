package io.etserve;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/** etserve: ExecuTorch programs over the Open Inference Protocol. */
@SpringBootApplication
@ConfigurationPropertiesScan
public class EtServeApplication {
    public static void main(String[] args) {
        SpringApplication.run(EtServeApplication.class, args);
    }
}
